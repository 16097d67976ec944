"""Does ``python -m grader new-exercise`` give a maintainer a new exercise in one command: its
pieces written, placeholders that fail until filled, and, once filled with a small real
exercise (``double(x)``, checked against ``torch.mul(x, 2)``), the checks that cover it passing
with nothing else registered by hand? And does it refuse a name the course has?"""

from __future__ import annotations

import ast
import csv
import importlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import samples
from grader.__main__ import main
from grader.checks import EXERCISES, SECTIONS
from grader.errors import UsageError
from grader.scaffold import PLACEHOLDER, TEST_COMMAND, new_exercise
from samples import graded_cells
from tests.answers import assignment_of
from tests.settings import ROOT, TIMEOUT

SECTION, ASSIGNMENT = "10.5", "10.5-transformer-block"
#: Where placeholders could be left behind (the scaffold's own templates aside).
SCANNED = ("course", "grader", "tests/answers", "solutions", "notebooks")


def copy_of_the_course(into: Path) -> Path:
    """The working tree (this branch's files, committed or not) without .git, .venv or caches."""
    return shutil.copytree(ROOT, into, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "output", "*.egg-info"))


def placeholders_left(root: Path) -> list[str]:
    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".py", ".ipynb") and path != root / "grader" / "scaffold.py" \
                    and PLACEHOLDER in path.read_text(encoding="utf-8"):
                found.append(path.relative_to(root).as_posix())
    return found


def test_no_placeholder_is_left():
    """Is every TODO(new-exercise) the command wrote filled (the contract, the solution, the
    reference and the mistake, the answers)?"""
    assert placeholders_left(ROOT) == []


def declared_exercises(package: Path) -> set[str]:
    """The ``EXERCISE`` names the answers modules of a section declare (read, not imported)."""
    found = set()
    for path in sorted(package.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["EXERCISE"]:
                found.add(node.value.value)
    return found


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_exercise_has_its_pieces(section):
    """Does every graded cell of a section's notebook have its registered hidden check (which the
    clean-process verifier finds by name), its visible check and its declared answers, and no
    piece exist without the notebook's cell? (Derived: no list of names to keep by hand.)"""
    package = "s" + section.replace(".", "_")
    graded = set(graded_cells(assignment_of(section)))
    assert set(SECTIONS[section].EXERCISES) == graded
    assert all(EXERCISES[name] is SECTIONS[section].EXERCISES[name] for name in graded)
    assert {name[len("check_"):] for name in vars(importlib.import_module(f"course.visible.{package}"))
            if name.startswith("check_")} == graded
    assert declared_exercises(ROOT / "tests" / "answers" / package) == graded


# ---------------------------------------------------------------- writing and refusing


@pytest.fixture
def course(tmp_path) -> Path:
    """A copy of the course's notebooks and exercise folders (what the command reads and writes)."""
    for part in ("solutions", "course/visible", "grader/checks", "tests/answers"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    return tmp_path


def test_it_writes_every_piece(course):
    """Are the three modules valid Python, with the pieces the suite asks for (the forbidden calls,
    three planted bugs, one of them on a fixed device), is the exercise named in README.md's row of
    its section, and do the notebook's new cells (the contract with a folded hint, the exercise,
    the check with its points) come before the closing cells?"""
    readme = (course / "README.md").read_text()
    written = new_exercise(SECTION, "LayerNorm", "module", course)
    names = [p.relative_to(course).as_posix() for p in written]
    assert names == ["course/visible/s10_5/layer_norm.py", "grader/checks/s10_5/layer_norm.py",
                     "tests/answers/s10_5/layer_norm.py", "README.md",
                     f"solutions/{ASSIGNMENT}/transformer_block.ipynb"]
    for path in written[:3]:
        compile(path.read_text(), str(path), "exec")
    assert "    forbidden = NOTHING\n" in written[0].read_text()
    answers = written[2].read_text()
    assert answers.count("        bug(") == 3
    assert 'on_a_fixed_device(solution["LayerNorm"]), hidden=ON_A_FIXED_DEVICE)' in answers
    (row,) = [line for line in readme.splitlines() if line.startswith(f"| {SECTION} ")]
    before, after = row.split(" | "), written[3].read_text().splitlines()
    assert f"{before[1]}, `LayerNorm`" in after[readme.splitlines().index(row)]
    nb = json.loads(written[4].read_text())
    sources = ["".join(c["source"]) for c in nb["cells"]]
    at = next(i for i, s in enumerate(sources) if s.startswith("### Exercise: `LayerNorm`"))
    contract, solution, check = nb["cells"][at:at + 3]
    assert "<details><summary>Hint 1" in "".join(contract["source"])
    assert solution["metadata"]["nbgrader"] == {"grade": False, "grade_id": "LayerNorm", "locked": False,
                                                "schema_version": 3, "solution": True, "task": False}
    assert "### BEGIN SOLUTION" in "".join(solution["source"])
    meta = check["metadata"]["nbgrader"]
    assert (meta["grade_id"], meta["grade"], meta["points"]) == ("check_LayerNorm", True, 1)
    assert "".join(check["source"]).startswith('"""Check LayerNorm:')
    assert sources[at + 3].startswith("## Where you stand")  # 10.5 has no summary cell
    assert written[4].read_text().endswith("}\n")


@pytest.mark.parametrize("name, why", [
    ("qkv_projections", "grade id 'qkv_projections'"),  # 10.1's, another section
    ("FeedForward", "grade id 'FeedForward'"),
    ("feed_forward", "course/visible/s10_5/feed_forward.py is taken"),  # its module's name
    ("dropout", "course/visible/s10_5/dropout.py is taken"),  # a helper module, no exercise
    ("most_weights", "grade id 'most_weights'"),  # a prediction
    ("class", "not a Python name"),
])
def test_it_refuses_a_name_the_course_has(course, name, why):
    """Is a name that a notebook's grade id or a module already has refused, with what is taken,
    and nothing written?"""
    before = sorted(p.as_posix() for p in course.rglob("*"))
    notebook = (course / "solutions" / ASSIGNMENT / "transformer_block.ipynb").read_text()
    with pytest.raises(UsageError, match=re.escape(why)):
        new_exercise(SECTION, name, "function", course)
    assert sorted(p.as_posix() for p in course.rglob("*")) == before
    assert (course / "solutions" / ASSIGNMENT / "transformer_block.ipynb").read_text() == notebook


def test_the_command_line_refuses_with_one_line_and_exit_2(capsys, monkeypatch):
    """Does ``python -m grader new-exercise 10.1 qkv_projections`` say why on one line, exit 2?"""
    monkeypatch.chdir(ROOT)
    assert main(["new-exercise", "10.1", "qkv_projections", "--kind", "function"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("new-exercise: 'qkv_projections' exists"), error
    assert main(["new-exercise", "10.99", "anything", "--kind", "function"]) == 2  # no such section
    assert "No section '10.99'" in capsys.readouterr().err


# ---------------------------------------------------------------- filled: the checks pass

#: What a maintainer writes in the four places, for ``double(x) = 2 x``: (old, new) per file.
FILL = {
    "course/visible/s10_5/double.py": [
        ('Mistake("TODO(new-exercise)", "TODO(new-exercise): the mistake in a few words",\n'
         '                  "TODO(new-exercise): where to look.")',
         'Mistake("off_by_one", "one added to twice x",\n'
         '                  "Twice x is the whole answer: look for a constant added to it.")'),
        ('raise NotImplementedError("TODO(new-exercise): the reference")', "return torch.mul(x, 2)"),
        ('raise NotImplementedError("TODO(new-exercise): the mistake\'s outputs")',
         "return torch.mul(x, 2) + 1"),
        ('"TODO(new-exercise): the PyTorch reference"', '"torch.mul(x, 2)"'),
        ("TODO(new-exercise): what the visible check covers.", "Values and gradients on a 3-D input."),
        ("TODO(new-exercise): what passed, in a sentence.", "double doubles, gradients too."),
    ],
    "tests/answers/s10_5/double.py": [
        ('raise NotImplementedError("TODO(new-exercise): a right answer")', "return x.add(x)"),
        ('raise NotImplementedError("TODO(new-exercise): a planted bug")', "return x + x + 1"),
        ('"TODO(new-exercise): how it is written"', '"x.add(x)"'),
        ('bug("TODO(new-exercise): what is wrong", planted_bug,\n'
         '            hidden="TODO(new-exercise): words of the hidden message", mistake=MISTAKE),',
         'bug("x + x + 1", planted_bug, hidden="one added to twice x", mistake=MISTAKE),\n'
         '        bug("x * x", lambda x: x * x),'),
        ('raise NotImplementedError("TODO(new-exercise): another planted bug")', "return (2 * x).detach()"),
        ('bug("TODO(new-exercise): another mistake", other_bug, hidden="TODO(new-exercise): words of the '
         'hidden message"),', 'bug("detached", other_bug, hidden="grad"),'),
        ('# NO_SIGNATURE = "plain Python" (or "the same primitives as a right answer", ...)',
         'NO_SIGNATURE = "torch.mul(x, 2): the product the solution runs too"'),
    ],
}
NOTEBOOK = [  # the contract, the solution, the check's words
    ("TODO(new-exercise): the contract. The signature and the shapes; what must hold, and why; the trap a\n"
     "learner is likely to fall into. Never the sequence of calls: that goes in the hints.",
     "Write `double(x)`: a tensor of any shape, twice `x`, with gradients flowing back to `x`."),
    ("Hint 1: TODO(new-exercise)", "Hint 1: one operation"),
    ("TODO(new-exercise): a nudge first; a later hint may come near a recipe, never the code itself.",
     "Add the tensor to itself, or scale it."),
    ("TODO(new-exercise): the contract in one line.", "Twice x."),
    ('raise NotImplementedError("TODO(new-exercise): the solution")', "return 2 * x"),
    ("TODO(new-exercise) what the check covers, in a few words.", "values and gradients against torch.mul."),
]


def fill(root: Path) -> None:
    for where, edits in FILL.items():
        path = root / where
        text = path.read_text()
        for old, new in edits:
            assert old in text, (where, old)
            text = text.replace(old, new, 1)
        path.write_text(text)
    notebook = root / "solutions" / ASSIGNMENT / "transformer_block.ipynb"
    nb = json.loads(notebook.read_text())
    for old, new in NOTEBOOK:
        (cell,) = [c for c in nb["cells"] if old in "".join(c["source"])]
        cell["source"] = "".join(cell["source"]).replace(old, new).splitlines(keepends=True)
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def pytest_in(root: Path, *args: str, command: str = "python -m pytest -q -n 0 -m 'not slow'") \
        -> subprocess.CompletedProcess:
    """A pytest command line run in the copy at ``root`` (its python: this one)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("COURSE_ROOT", "PYTEST_ADDOPTS")}
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "pytest"], command
    return subprocess.run([sys.executable, *words[1:], "-p", "no:cacheprovider", *args], cwd=root,
                          capture_output=True, text=True, env=environment, timeout=600)


@pytest.mark.slow  # fresh Python processes that import torch, and nbgrader
def test_scaffold_fill_and_the_checks_pass(tmp_path):
    """In a copy of the course: run the command, see its placeholders fail the suite, fill the
    places with double(x), regenerate the learner notebook, and see the test command it printed
    (the fast tier) pass, the answers, the visible tests, the case kinds, the registration, the
    operator walk and ruff among it; then grade a solved and a planted submission through
    ``python -m grader autograde``: 1 point for double, and 0."""
    root = copy_of_the_course(tmp_path / "course")
    run = subprocess.run([sys.executable, "-m", "grader", "new-exercise", SECTION, "double", "--kind",
                          "function"], cwd=root, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"\n  {TEST_COMMAND}\n" in run.stdout and "-k" not in run.stdout  # a marker, no list of names

    unfilled = pytest_in(root, "tests/test_new_exercise.py", "tests/test_answers.py", "-k",
                         "double or placeholder")
    failed = set(re.findall(r"^FAILED (.+?)(?: - .*)?$", unfilled.stdout, flags=re.M))
    assert {"tests/test_new_exercise.py::test_no_placeholder_is_left",
            "tests/test_answers.py::test_right_answer_passes[double: solution]"} <= failed, unfilled.stdout

    fill(root)
    assert placeholders_left(root) == []
    generated = subprocess.run([sys.executable, "-m", "grader", "generate", ASSIGNMENT], cwd=root,
                               capture_output=True, text=True, timeout=300)
    assert generated.returncode == 0, generated.stderr
    filled = pytest_in(root, "-rA", command=TEST_COMMAND)  # the command it printed: the fast tier
    assert filled.returncode == 0, filled.stdout[-4000:]
    passed = {re.sub(r"@[\w.-]+\]?$", "", test)  # without its xdist group ("…]@answers-10.5]")
              for test in re.findall(r"^PASSED (\S.*)$", filled.stdout, flags=re.M)}
    for test in ("test_answers.py::test_right_answer_passes[double: x.add(x)]",
                 "test_answers.py::test_planted_bug_fails_with_its_message[double: x + x + 1]",
                 "test_visible.py::test_visible_test_catches_planted_bug[double: x + x + 1]",
                 "test_visible.py::test_points_come_from_the_notebook[10.5]",
                 "test_case_kinds.py::test_every_hidden_kind_has_a_visible_case[double]",
                 "test_layout.py::test_check_functions_are_bound_by_name[10.5]",
                 "test_new_exercise.py::test_every_exercise_has_its_pieces[10.5]",
                 "test_new_exercise.py::test_no_placeholder_is_left",
                 "test_operator_walk.py::test_an_empty_signature_is_recorded_with_why[double]",
                 "test_answers.py::test_every_device_check_has_a_planted_bug_it_catches",
                 "test_lint.py::test_ruff_check_passes"):
        assert f"tests/{test}" in passed, (test, filled.stdout[-3000:])

    # Graded as a class is: the solved notebook gets the exercise's point, the planted bug none.
    subs = tmp_path / "subs"
    right = samples.solved(ASSIGNMENT, root)
    samples.write(right, subs, "right", ASSIGNMENT)
    samples.write(samples.plant(right, "double", "def double(x):\n    return x + x + 1", append=False),
                  subs, "wrong", ASSIGNMENT)
    graded = subprocess.run([sys.executable, "-m", "grader", "autograde", str(subs), "--out",
                             str(tmp_path / "out"), "--quiet", "--jobs", "2", "--timeout", str(TIMEOUT)],
                            cwd=root, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stderr[-3000:]
    with open(tmp_path / "out" / "grades.csv", newline="") as table:
        rows = {row["student_id"]: row for row in csv.DictReader(table)}
    assert rows["right"]["status"] == rows["wrong"]["status"] == "ok", rows
    assert (float(rows["right"]["double"]), float(rows["wrong"]["double"])) == (1.0, 0.0), rows
    assert float(rows["right"]["score"]) == float(rows["wrong"]["score"]) + 1, rows
