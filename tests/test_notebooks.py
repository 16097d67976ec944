"""Do the notebooks run top to bottom: the instructor's with every test passing, the learner's
with no error but the NotImplementedError of unfinished exercises?"""

import ast
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient

from grader.paths import assignment_names as assignments
from samples import notebook_path

pytestmark = pytest.mark.slow  # starts kernels

ASSIGNMENTS = assignments()


@pytest.fixture(autouse=True)
def quick_kernels(monkeypatch):
    """Kernels run the short version of long cells, and draw without a screen."""
    monkeypatch.setenv("COURSE_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")


def execute(path):
    """Run a notebook in a fresh kernel; returns (seconds, [(cell index, error name, message)])."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [(i, out.ename, out.evalue) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    return time.perf_counter() - start, errors


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solution_notebook_passes_every_test(name):
    """Does the instructor notebook run with every visible and hidden test passing?"""
    seconds, errors = execute(notebook_path(name, "solutions"))
    assert not errors, f"{name}: {errors}"
    print(f"{name}: {seconds:.1f} s")


UNFINISHED = ("NotImplementedError", "NotAttempted")
NAME_ERROR = re.compile(r"name '(\w+)' is not defined")


def left_undefined(path, errors):
    """Names a cell assigns at its top level when it stopped at an unfinished exercise: a later
    cell that reads one (10.7's trained ``model``) fails with a NameError because of that exercise."""
    cells = nbformat.read(path, as_version=4).cells
    names = set()
    for i, ename, _ in errors:
        if ename in UNFINISHED:
            for node in ast.parse(cells[i].source).body:
                if isinstance(node, ast.Assign):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_learner_notebook_fails_only_on_unfinished_exercises(name):
    """Does the learner notebook run with only NotImplementedError from the empty exercises (their
    test cells say "not written yet": NotAttempted)?"""
    _, errors = execute(notebook_path(name, "notebooks"))
    undefined = left_undefined(notebook_path(name, "notebooks"), errors)
    unexpected = [e for e in errors if e[1] not in UNFINISHED
                  and not (e[1] == "NameError" and NAME_ERROR.fullmatch(e[2])
                           and NAME_ERROR.fullmatch(e[2]).group(1) in undefined)]
    assert not unexpected, f"{name}: {unexpected}"
    assert errors, f"{name}: a learner notebook with nothing to do?"
