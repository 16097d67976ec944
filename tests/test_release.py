"""Are the learner notebooks exactly what nbgrader makes of the sources, with nothing leaked?"""

import filecmp
import subprocess

import nbformat
import pytest

from grader.errors import PublishError, UsageError
from grader.paths import assignment_names, course_root
from grader.publish import generate
from grader.publish.leaks import code_keys, lines_in, solution_lines

ROOT = course_root()
SOURCE, RELEASE = ROOT / "solutions", ROOT / "notebooks"
ASSIGNMENTS = assignment_names(SOURCE)


def test_every_source_has_a_learner_notebook():
    """Does every assignment in solutions/ have its generated notebook in notebooks/?"""
    assert ASSIGNMENTS, "no assignment found in solutions/"
    for name in ASSIGNMENTS:
        sources = sorted(p.name for p in (SOURCE / name).glob("*.ipynb"))
        learner = sorted(p.name for p in (RELEASE / name).glob("*.ipynb"))
        assert sources == learner, f"run `python -m grader generate {name}` and commit notebooks/"


@pytest.mark.slow
def test_regenerating_changes_nothing(tmp_path):
    """Does regenerating with nbgrader give byte-identical learner notebooks, one per source?"""
    generate.generate_assignments(ASSIGNMENTS, SOURCE, tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("*/*.ipynb"))
    assert fresh == sorted(p.relative_to(SOURCE) for p in SOURCE.glob("*/*.ipynb")), (
        "nbgrader did not generate one learner notebook per instructor notebook")
    for path in fresh:
        committed = RELEASE / path
        assert filecmp.cmp(tmp_path / path, committed, shallow=False), (
            f"{committed} is stale: run `python -m grader generate` and commit notebooks/")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_solution_or_hidden_test_leaks(name):
    """Does a learner notebook hold no solution line, hidden test or grader import?"""
    (source,) = (SOURCE / name).glob("*.ipynb")
    cells = nbformat.read(RELEASE / name / source.name, as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "code")
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader.checks", "from grader"):
        assert marker not in text
    leaked = lines_in(solution_lines(source), set().union(*(code_keys(c.source) for c in cells
                                                            if c.cell_type == "code")))
    assert solution_lines(source), "no solution lines found: the leak test would prove nothing"
    assert not leaked, f"solution lines in the learner notebook: {leaked[:3]}"


def test_refuses_to_overwrite_edited_learner_notebooks(tmp_path):
    """Does generate refuse to overwrite a learner notebook with uncommitted edits (and only after
    it knows the assignment: an unknown name is a usage error, whatever the working tree)?"""
    notebooks = tmp_path / "notebooks"
    (notebooks / "10.1-self-attention").mkdir(parents=True)
    work = notebooks / "10.1-self-attention" / "work.ipynb"
    work.write_text("{}")
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "release"], cwd=tmp_path, check=True)
    work.write_text('{"my": "answers"}')
    assert generate.edited_notebooks(notebooks) == ["notebooks/10.1-self-attention/work.ipynb"]
    with pytest.raises(PublishError, match="(?s)Refusing to overwrite.*work.ipynb"):
        generate.generate(["10.1-self-attention"], release=notebooks)
    with pytest.raises(UsageError, match="No assignment 'nope'"):
        generate.generate(["nope"], release=notebooks)
    assert work.read_text() == '{"my": "answers"}'


def test_an_edit_elsewhere_does_not_block_generate(tmp_path, monkeypatch):
    """Does generate refuse only for edited notebooks it would overwrite: an uncommitted edit of
    10.1's learner notebook leaves generating 10.2 free (nbgrader itself stubbed out here)?"""
    notebooks = tmp_path / "notebooks"
    (notebooks / "10.1-self-attention").mkdir(parents=True)
    work = notebooks / "10.1-self-attention" / "work.ipynb"
    work.write_text("{}")
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "release"], cwd=tmp_path, check=True)
    work.write_text('{"my": "answers"}')
    ran = []
    monkeypatch.setattr(generate, "generate_assignments", lambda names, *_: ran.extend(names))
    other = "10.2-scaled-dot-product-attention"
    assert generate.generate([other], release=notebooks) == [other] and ran == [other]
    with pytest.raises(PublishError, match="work.ipynb"):
        generate.generate(["10.1-self-attention", other], release=notebooks)
    assert ran == [other] and work.read_text() == '{"my": "answers"}'


def test_unknown_assignment_says_what_exists(tmp_path):
    """Is an unknown assignment name answered with the list of real ones?"""
    with pytest.raises(UsageError, match="No assignment 'nope'.*10.1-self-attention"):
        generate.generate(["nope"], release=tmp_path)


@pytest.mark.slow
def test_unreadable_source_names_the_file(tmp_path):
    """Does nbgrader's failure on a broken source notebook reach the user with the file name?"""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "broken.ipynb").write_text("{not json")
    with pytest.raises(PublishError, match="broken"):
        generate.generate_assignments(["broken"], tmp_path, tmp_path / "out")


def test_generated_notebooks_are_committed_clean():
    """Are the committed learner notebooks free of outputs (as nbgrader writes them)?"""
    notebooks = sorted(RELEASE.glob("*/*.ipynb"))
    assert len(notebooks) == len(ASSIGNMENTS)
    for path in notebooks:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path
