"""Do the instructor notebooks run top to bottom with every test passing? (The learner notebooks
run once, alone as on Colab, in tests/test_self_contained.py: no error but the unfinished
exercises'.)"""

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
