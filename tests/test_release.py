"""Are the learner notebooks exactly what nbgrader makes of the sources, with nothing leaked?"""

import filecmp
import subprocess

import nbformat
import pytest

from grader import release
from grader.bundle import solution_lines
from tests.notebook_code import ROOT

ASSIGNMENTS = release.assignments()


def test_every_source_has_a_learner_notebook():
    """Does every assignment in solutions/ have its generated notebook in notebooks/?"""
    for name in ASSIGNMENTS:
        sources = sorted(p.name for p in (release.SOURCE / name).glob("*.ipynb"))
        learner = sorted(p.name for p in (release.RELEASE / name).glob("*.ipynb"))
        assert sources == learner, f"run `python -m grader generate {name}` and commit notebooks/"


def test_regenerating_changes_nothing(tmp_path):
    """Does regenerating with nbgrader give byte-identical learner notebooks?"""
    release.generate_assignments(ASSIGNMENTS, release.SOURCE, tmp_path)
    for fresh in tmp_path.glob("*/*.ipynb"):
        committed = release.RELEASE / fresh.parent.name / fresh.name
        assert filecmp.cmp(fresh, committed, shallow=False), (
            f"{committed} is stale: run `python -m grader generate` and commit notebooks/")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_no_solution_or_hidden_test_leaks(name):
    """Does a learner notebook hold no solution line, hidden test or grader import?"""
    (source,) = (release.SOURCE / name).glob("*.ipynb")
    cells = nbformat.read(release.RELEASE / name / source.name, as_version=4).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "code")
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader.checks", "from grader"):
        assert marker not in text
    leaked = [line for line in solution_lines(source) if line in text]
    assert solution_lines(source), "no solution lines found: the leak test would prove nothing"
    assert not leaked, f"solution lines in the learner notebook: {leaked[:3]}"


def test_refuses_to_overwrite_edited_learner_notebooks(tmp_path):
    """Does generate refuse to overwrite a learner notebook with uncommitted edits?"""
    notebooks = tmp_path / "notebooks"
    (notebooks / "a").mkdir(parents=True)
    work = notebooks / "a" / "work.ipynb"
    work.write_text("{}")
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "release"], cwd=tmp_path, check=True)
    work.write_text('{"my": "answers"}')
    assert release.edited_notebooks(notebooks) == ["notebooks/a/work.ipynb"]
    with pytest.raises(SystemExit, match="(?s)Refusing to overwrite.*work.ipynb"):
        release.generate(["10.1-self-attention"], release=notebooks)
    assert work.read_text() == '{"my": "answers"}'


def test_unknown_assignment_says_what_exists(tmp_path):
    """Is an unknown assignment name answered with the list of real ones?"""
    with pytest.raises(SystemExit, match="No assignment 'nope'.*10.1-self-attention"):
        release.generate(["nope"], release=tmp_path)


def test_unreadable_source_names_the_file(tmp_path):
    """Does nbgrader's failure on a broken source notebook reach the user with the file name?"""
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "broken.ipynb").write_text("{not json")
    with pytest.raises(RuntimeError, match="broken"):
        release.generate_assignments(["broken"], tmp_path, tmp_path / "out")


def test_generated_notebooks_are_committed_clean():
    """Are the committed learner notebooks free of outputs (as nbgrader writes them)?"""
    for path in ROOT.glob("notebooks/*/*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path
