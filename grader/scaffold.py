"""``python -m grader new-exercise SECTION NAME --kind function|module``: a new exercise's files.

Writes every piece of an exercise the suite asks for (docs/course.md, "Adding an exercise"), with
placeholders marked ``TODO(new-exercise)`` that fail until they are filled:

- ``course/visible/s10_X/<file>.py``: the exercise on the one engine (one visible case with
  its kind, the reference, one known mistake, the calls that earn no credit: ``forbidden``) and
  ``check_<name>``;
- ``grader/checks/s10_X/<file>.py``: the registered hidden subclass (the visible cases re-seeded);
- ``tests/answers/s10_X/<file>.py``: a second right answer and three planted bugs, one of them
  the solution on a fixed device (the engine's device probe must be seen to catch it);
- the solution notebook's cells: the contract (with a folded hint), the exercise cell (grade id
  ``<name>``) and the check cell (grade id ``check_<name>``, 1 point), before the notebook's
  ``## Summary`` (or ``## Where you stand``);
- the exercise's name in its section's row of README.md's table.

Nothing else needs registering: the section packages, the tests and "where you stand" find
the exercise from these. It refuses a name the course already has.
"""

from __future__ import annotations

import json
import keyword
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.paths import SOLUTIONS, course_root

PLACEHOLDER = "TODO(new-exercise)"
#: The fast tier (make test-fast): green, the new exercise leaves the whole tier green.
TEST_COMMAND = 'python -m pytest -n 2 -m "not slow and not browser"'
KINDS = ("function", "module")
#: Where each side's module goes, under the checkout.
SIDES = ("course/visible", "grader/checks", "tests/answers")
#: The headings that close a notebook; the new cells go before the first of them.
CLOSING = ("## Summary", "## Where you stand")


def file_stem(name: str) -> str:
    """``FeedForward`` -> ``feed_forward``; ``qkv_projections`` stays."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def class_name(name: str, kind: str) -> str:
    """The exercise's class: ``double`` -> ``Double``, ``LayerNorm`` -> ``LayerNormModule``."""
    camel = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
    return camel + ("Module" if kind == "module" else "Exercise")


@dataclass(frozen=True)
class Scaffold:
    """Where a new exercise's pieces go."""

    root: Path
    section: str
    name: str
    kind: str

    @property
    def package(self) -> str:
        return "s" + self.section.replace(".", "_")

    def module(self, side: str) -> Path:
        return self.root / side / self.package / f"{file_stem(self.name)}.py"

    @property
    def notebook(self) -> Path:
        folders = sorted((self.root / SOLUTIONS).glob(f"{self.section}-*"))
        notebooks = sorted(folders[0].glob("*.ipynb")) if len(folders) == 1 else []
        if len(notebooks) != 1:
            raise UsageError(f"No section {self.section!r} in {self.root / SOLUTIONS}: give a section "
                             "such as 10.5 (its folder solutions/10.5-* holds one notebook).")
        return notebooks[0]

    @property
    def files(self) -> dict[Path, str]:
        return {self.module(side): template.format(**self.fields) for side, template in
                zip(SIDES, TEMPLATES[self.kind])}

    @property
    def fields(self) -> dict[str, str]:
        return {"name": self.name, "cls": class_name(self.name, self.kind), "package": self.package,
                "stem": file_stem(self.name), "todo": PLACEHOLDER, "section": self.section}


def grade_ids(root: Path) -> set[str]:
    """Every nbgrader grade id of every solution notebook."""
    found = set()
    for path in sorted((root / SOLUTIONS).glob("*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if grade_id:
                found.add(grade_id)
    return found


def refusal(scaffold: Scaffold) -> str | None:
    """Why ``scaffold`` cannot be written (a bad name, one the course has), or None."""
    name, root = scaffold.name, scaffold.root
    if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
        return f"{name!r} is not a Python name: the learner defines it in the notebook."
    ids = grade_ids(root)
    for grade_id in (name, f"check_{name}", f"predict_{name}"):
        if grade_id in ids:
            return f"{name!r} exists: a solution notebook has a cell with grade id {grade_id!r}."
    stem = file_stem(name)
    for side in SIDES:
        taken = sorted((root / side).glob(f"s*_*/{stem}.py"))
        if taken:
            return f"{name!r} exists: {taken[0].relative_to(root)} is taken; choose another name."
    return None


def new_cell(cell_type: str, source: str, nbgrader: dict | None = None, locked: bool = False) -> dict:
    cell: dict = {"cell_type": cell_type, "id": secrets.token_hex(4), "metadata": {}}
    if nbgrader is not None:
        cell["metadata"] = {"deletable": False, **({"editable": False} if locked else {}),
                            "nbgrader": {"schema_version": 3, "task": False, **nbgrader}}
        cell["metadata"]["nbgrader"] = dict(sorted(cell["metadata"]["nbgrader"].items()))
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    cell["source"] = source.rstrip("\n").splitlines(keepends=True)  # Jupyter's: no final newline
    return dict(sorted(cell.items()))


def notebook_cells(scaffold: Scaffold) -> list[dict]:
    """The contract, the exercise cell and the check cell of ``scaffold``."""
    fields = scaffold.fields
    return [
        new_cell("markdown", CONTRACT.format(**fields)),
        new_cell("code", SOLUTION[scaffold.kind].format(**fields),
                 {"grade": False, "grade_id": scaffold.name, "locked": False, "solution": True}),
        new_cell("code", CHECK_CELL.format(**fields),
                 {"grade": True, "grade_id": f"check_{scaffold.name}", "locked": True, "points": 1,
                  "solution": False}, locked=True),
    ]


def insert_cells(path: Path, cells: list[dict]) -> None:
    """Put ``cells`` before the notebook's summary (or its "where you stand"), formatting kept."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    headings = ["".join(c["source"]).lstrip() for c in nb["cells"]]
    at = next((i for i, h in enumerate(headings) if nb["cells"][i]["cell_type"] == "markdown"
               and h.startswith(CLOSING)), len(nb["cells"]))
    nb["cells"][at:at] = cells
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def add_to_readme(root: Path, section: str, name: str) -> Path:
    """Name the exercise in its section's row of README.md's table ("| 10.5 ... | `FeedForward`, ...")."""
    readme = root / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True) if readme.is_file() else []
    rows = [i for i, line in enumerate(lines) if line.startswith(f"| {section} ")]
    if len(rows) != 1:
        raise UsageError(f"{readme} has no row of section {section} in its table of exercises: add one "
                         "(| section | you implement | checked against |), then run the command again.")
    cells = lines[rows[0]].split(" | ")
    cells[1] += f", `{name}`"
    lines[rows[0]] = " | ".join(cells)
    readme.write_text("".join(lines), encoding="utf-8")
    return readme


def new_exercise(section: str, name: str, kind: str, root: Path | None = None) -> list[Path]:
    """Write a new exercise's pieces in the checkout at ``root``; returns what it wrote."""
    root = (root or course_root()).resolve()
    if kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: choose function or module.")
    if not all((root / side).is_dir() for side in SIDES):
        raise UsageError(f"{root} is not a checkout of the course (it needs {', '.join(SIDES)}).")
    scaffold = Scaffold(root, section, name, kind)
    notebook = scaffold.notebook
    if not (root / "course/visible" / scaffold.package).is_dir():
        raise UsageError(f"Section {section} has no package course/visible/{scaffold.package}/.")
    why = refusal(scaffold)
    if why:
        raise UsageError(why)
    cells = notebook_cells(scaffold)
    readme = add_to_readme(root, section, name)  # first: it may refuse, before anything is written
    for path, text in scaffold.files.items():
        path.write_text(text, encoding="utf-8")
    insert_cells(notebook, cells)
    return [*scaffold.files, readme, notebook]


def next_steps(section: str, name: str, written: list[Path], root: Path) -> str:
    """What the command prints: the files, the four places to fill, the one test command."""
    lines = [f"wrote {p.relative_to(root)}" for p in written]
    lines += [f"Fill every {PLACEHOLDER}: the contract and the solution in the notebook, the reference, "
              "the case, the mistake and the forbidden calls in the visible module, the answers. "
              "Regenerate the learner notebook:",
              f"  python -m grader generate {written[-1].parent.name}",
              f"then run the fast tier ({name}'s tests, every suite-wide invariant and ruff):",
              f"  {TEST_COMMAND}",
              "and commit the pieces, the solution notebook and the learner notebook together."]
    return "\n".join(lines)


# ---------------------------------------------------------------- the templates

CONTRACT = """\
### Exercise: `{name}`

{todo}: the contract. The signature and the shapes; what must hold, and why; the trap a
learner is likely to fall into. Never the sequence of calls: that goes in the hints.

<details><summary>Hint 1: {todo}</summary>

{todo}: a nudge first; a later hint may come near a recipe, never the code itself.

</details>
"""

SOLUTION = {
    "function": '''\
def {name}(x):
    """{todo}: the contract in one line."""
    ### BEGIN SOLUTION
    raise NotImplementedError("{todo}: the solution")
    ### END SOLUTION
''',
    "module": '''\
class {name}(nn.Module):
    """{todo}: the contract in one line."""

    def __init__(self, d_model):
        super().__init__()
        ### BEGIN SOLUTION
        self.d_model = d_model
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        raise NotImplementedError("{todo}: the solution")
        ### END SOLUTION
''',
}

CHECK_CELL = '''\
"""Check {name}: {todo} what the check covers, in a few words."""
visible.check_{name}({name})
### BEGIN HIDDEN TESTS
from grader.checks import {package}
{package}.check_{name}({name})
### END HIDDEN TESTS
'''

_VISIBLE_HEAD = '''\
"""``{name}``: the exercise (inputs, reference, known mistakes, visible cases) and its visible
check. Written by ``python -m grader new-exercise``."""

from __future__ import annotations

from functools import partial

import torch

from course.checking import (
    Case,
    Exercise,
    Mistake,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.forbidden import NOTHING

# Each known mistake, declared once: what the learner probably did, and where to look (never
# the line that fixes it); ``mistakes`` pairs it with a function that reproduces it.
MISTAKE = Mistake("{todo}", "{todo}: the mistake in a few words",
                  "{todo}: where to look.")

# The visible cases, each naming its kind (grading runs them again with other seeds).
CASES = [
    Case("x (2, 3, 4)", 1, {{"shape": (2, 3, 4)}}, torch.float32, kind="3-D"),
]


def inputs(case: Case, device) -> dict[str, torch.Tensor]:
    """The inputs of a case, leaves that collect gradients."""
    return {{"x": randn(case.params["shape"], generator(case.seed), case.dtype, device).requires_grad_()}}


def torch_{stem}(x: torch.Tensor) -> torch.Tensor:
    """The reference: PyTorch's own functions, never the solution's code."""
    raise NotImplementedError("{todo}: the reference")


def with_mistake(x: torch.Tensor) -> torch.Tensor:
    """MISTAKE reproduced with PyTorch's functions."""
    raise NotImplementedError("{todo}: the mistake's outputs")


def outputs(case: Case, device, fn=torch_{stem}) -> dict:
    """``fn``'s output on a case, with the gradients of its inputs."""
    x = inputs(case, device)
    return with_gradients(lambda: (fn(x["x"]),), ("output",), x, case.seed)
'''

_VISIBLE_TAIL = '''

@visible_check
def check_{name}({name}) -> None:
    """{todo}: what the visible check covers."""
    {cls}().run_cases({name})
    passed("{todo}: what passed, in a sentence.")
'''

VISIBLE = {
    "function": _VISIBLE_HEAD + '''

class {cls}(Exercise):
    name = "{name}"
    reference_name = "{todo}: the PyTorch reference"
    mistakes = {{MISTAKE: partial(outputs, fn=with_mistake)}}
    visible_cases = CASES
    # The PyTorch calls that compute the answer earn no credit: name them (course.checking.forbidden:
    # SOFTMAX, ATTENTION, ...) and plant a bug that makes one. NOTHING where the reference runs nothing
    # a right answer does not (then the answers module says why, in NO_SIGNATURE).
    forbidden = NOTHING

    def run(self, impl, case, device):
        x = inputs(case, device)

        def call():
            return (expect_tensor(self.call(case, impl, x["x"]), f"{{self.name}}'s output", case),)

        return with_gradients(call, ("output",), x, case.seed)

    def reference(self, case, device):
        return outputs(case, device)
''' + _VISIBLE_TAIL,
    "module": _VISIBLE_HEAD + '''

class {cls}(Exercise):
    name = "{name}"
    reference_name = "{todo}: the PyTorch reference"
    mistakes = {{MISTAKE: partial(outputs, fn=with_mistake)}}
    visible_cases = CASES
    # The PyTorch calls that compute the answer earn no credit: name them (course.checking.forbidden:
    # SOFTMAX, ATTENTION, ...) and plant a bug that makes one. NOTHING where the reference runs nothing
    # a right answer does not (then the answers module says why, in NO_SIGNATURE).
    forbidden = NOTHING

    def run(self, impl, case, device):
        module = self.build(impl, case, case.params["shape"][-1]).to(device)
        # A module with weights: give them the case's values (course.checking.modules.load_parameters)
        # and collect their gradients too.
        x = inputs(case, device)

        def call():
            return (expect_tensor(self.call(case, module, x["x"]), f"{{self.name}}'s output", case),)

        return with_gradients(call, ("output",), x, case.seed)

    def reference(self, case, device):
        return outputs(case, device)
''' + _VISIBLE_TAIL,
}

HIDDEN = '''\
"""Hidden check of ``{name}`` (defined in its visible module): the visible cases again with
other seeds, and on 'meta' for tensors on a fixed device (the engine's). Add grading's own here:
``own_cases`` (more instances of the visible kinds), the calls it may not make (``forbidden``)."""

from __future__ import annotations

from course.visible.{package}.{stem} import {cls}
from grader.checks.exercise import GradedExercise, registered


@registered
class Graded{cls}({cls}, GradedExercise):
    own_cases = []  # grading's own cases (other sizes, float64), each of a visible case's kind
'''

ANSWERS = '''\
"""{name}: right answers written differently, and planted bugs."""
{torch_import}
from course.visible.{package}.{stem} import MISTAKE
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "{name}"
# Where the reference runs nothing its right answers do not, tests/test_operator_walk.py asks why:
# NO_SIGNATURE = "plain Python" (or "the same primitives as a right answer", ...)


{right}


{bug}


{other_bug}


def answers(solution):
    # The suite asks for the solution, one more right answer and at least three planted bugs, one
    # of them the solution on a fixed device. hidden= is a regular expression that the hidden
    # check's message must match (case ignored).
    return [
        right("solution", solution["{name}"]),
        right("{todo}: how it is written", {right_name}),
        bug("{todo}: what is wrong", {bug_name},
            hidden="{todo}: words of the hidden message", mistake=MISTAKE),
        bug("{todo}: another mistake", {other_bug_name}, hidden="{todo}: words of the hidden message"),
        bug("on a fixed device", on_a_fixed_device(solution["{name}"]), hidden=ON_A_FIXED_DEVICE),
    ]
'''

_RIGHT_FUNCTION = '''def right_answer(x):
    """A right answer written differently from the solution."""
    raise NotImplementedError("{todo}: a right answer")'''
_BUG_FUNCTION = '''def planted_bug(x):
    """MISTAKE, planted."""
    raise NotImplementedError("{todo}: a planted bug")'''
_RIGHT_MODULE = '''class RightAnswer(nn.Module):
    """A right answer written differently from the solution."""

    def __init__(self, d_model):
        super().__init__()
        raise NotImplementedError("{todo}: a right answer")'''
_OTHER_FUNCTION = '''def other_bug(x):
    """Another likely mistake, planted."""
    raise NotImplementedError("{todo}: another planted bug")'''
_BUG_MODULE = _RIGHT_MODULE.replace("RightAnswer", "PlantedBug").replace("a right answer", "a planted bug") \
    .replace("A right answer written differently from the solution.", "MISTAKE, planted.")
_OTHER_MODULE = _RIGHT_MODULE.replace("RightAnswer", "OtherBug") \
    .replace("a right answer", "another planted bug") \
    .replace("A right answer written differently from the solution.", "Another likely mistake, planted.")
_ANSWER_PARTS = {
    "function": {"right": _RIGHT_FUNCTION, "bug": _BUG_FUNCTION, "other_bug": _OTHER_FUNCTION,
                 "torch_import": "", "right_name": "right_answer", "bug_name": "planted_bug",
                 "other_bug_name": "other_bug"},
    "module": {"right": _RIGHT_MODULE, "bug": _BUG_MODULE, "other_bug": _OTHER_MODULE,
               "torch_import": "\nfrom torch import nn\n", "right_name": "RightAnswer",
               "bug_name": "PlantedBug", "other_bug_name": "OtherBug"},
}


def _answers(kind: str) -> str:
    """The answers' template of ``kind``, its other fields left for :meth:`Scaffold.files`."""
    text = ANSWERS
    for key, value in _ANSWER_PARTS[kind].items():  # the functions first: they hold {todo}
        text = text.replace("{" + key + "}", value)
    return text


TEMPLATES = {kind: (VISIBLE[kind], HIDDEN, _answers(kind)) for kind in KINDS}
