"""Does each learner notebook run with nothing but itself and what its setup cell fetches?

This is the Colab path: an empty folder holding one notebook, no course package installed.
The kernel is given what the setup cell's pip line installs there (the student release's
helpers) on its path, through FETCHED_COURSE; that the pip line installs exactly that is
tests/test_student_bundle.py's Colab test.
"""

import json
import shutil
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from grader.paths import course_root
from grader.publish import bundle
from samples import not_for_unfinished_exercises

pytestmark = pytest.mark.slow  # starts kernels

ROOT = course_root()
RELEASE = ROOT / "notebooks"

# Start a kernel in which the editable install of this repository is invisible, and the
# folder FETCHED_COURSE names (when set) is where the helpers are.
HIDE_COURSE = (
    "import os, sys;"
    "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')];"
    f"sys.path[:] = [p for p in sys.path if p not in ('', {str(ROOT)!r})];"
    "sys.path[:0] = [os.environ['FETCHED_COURSE']] if os.environ.get('FETCHED_COURSE') else [];"
    "from ipykernel import kernelapp; kernelapp.launch_new_instance()"
)


@pytest.fixture(scope="module")
def isolated_kernel(tmp_path_factory):
    """A kernelspec 'isolated' on JUPYTER_PATH: python without this repo's packages."""
    share = tmp_path_factory.mktemp("jupyter")
    spec = share / "kernels" / "isolated"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-c", HIDE_COURSE, "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "isolated",
                                                  "language": "python"}))
    return share


@pytest.fixture(scope="module")
def fetched_copy(tmp_path_factory):
    """What the setup cell would fetch on Colab: the student release."""
    return bundle.build_student_bundle(tmp_path_factory.mktemp("fetched") / "transformer-course")


def run_alone(notebook, folder, jupyter_path, monkeypatch, fetched=None):
    """Run ``notebook`` copied alone into ``folder``; returns its errors ``(cell, name, message)``
    and the notebook as it ran."""
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("COURSE_QUICK", "1")
    if fetched:
        monkeypatch.setenv("FETCHED_COURSE", str(fetched))
    else:
        monkeypatch.delenv("FETCHED_COURSE", raising=False)
    target = folder / notebook.name
    shutil.copy(notebook, target)
    nb = nbformat.read(target, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="isolated", allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    return [(i, out.ename, out.evalue) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            for out in cell.outputs if out.output_type == "error"], nb


def test_isolated_kernel_really_lacks_the_course(isolated_kernel, tmp_path, monkeypatch):
    """Without the fetched helpers, does the setup cell fail (so the other tests prove something)?"""
    notebook = next(RELEASE.glob("10.1*/*.ipynb"))
    errors, _ = run_alone(notebook, tmp_path, isolated_kernel, monkeypatch)
    assert errors and errors[0][1] == "ModuleNotFoundError"


@pytest.mark.parametrize("notebook", sorted(RELEASE.glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_notebook_runs_alone(notebook, isolated_kernel, fetched_copy, tmp_path, monkeypatch):
    """Does the notebook run alone, failing only on the learner's unfinished exercises?"""
    errors, nb = run_alone(notebook, tmp_path, isolated_kernel, monkeypatch, fetched=fetched_copy)
    assert errors, "a learner notebook with nothing to do?"
    assert not_for_unfinished_exercises(nb, errors) == [], errors
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [notebook.name]
