"""Does a rerun regrade exactly when something that can change a grade has changed: the
student's files, any grading code (checks, host side, course helpers), the versions of
torch, numpy and nbgrader? (grader/autograde/host/fingerprint.py)"""

from __future__ import annotations

import shutil

import pytest

from grader.autograde.host import fingerprint, run
from grader.autograde.host.options import Options
from grader.autograde.host.run import autograde
from tests.settings import ROOT
from tests.submissions import planted

#: One file of each kind of grading code; editing any must change the fingerprint.
EDITED = ["grader/checks/s10_2/softmax.py", "grader/checks/shared_references.py",
          "grader/checks/guarded_calls.py",
          "grader/autograde/worker/job.py", "grader/autograde/worker/verify.py", "grader/nbgrader_config.py",
          "course/checking/failure.py", "course/plotting.py"]


@pytest.fixture()
def packages(tmp_path):
    """Copies of the grader and the course helpers, to edit."""
    for name in ("grader", "course"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return [tmp_path / "grader", tmp_path / "course"]


def test_fingerprint_covers_the_grader_and_the_course():
    """Are both packages (and the versions) in the default fingerprint?"""
    assert [p.name for p in fingerprint.grading_packages()] == ["grader", "course"]
    assert set(fingerprint.VERSIONED) == {"torch", "numpy", "nbgrader"}


@pytest.mark.parametrize("edited", EDITED)
def test_editing_grading_code_changes_the_fingerprint(packages, edited):
    """Does editing any file of the grading code change the fingerprint?"""
    before = fingerprint.grading_code_digest(packages)
    path = packages[0].parent / edited
    path.write_text(path.read_text() + "\n# edited\n")
    assert fingerprint.grading_code_digest(packages) != before


def test_bytecode_and_other_files_do_not_count(packages):
    """Do __pycache__ and non-Python files leave the fingerprint alone?"""
    before = fingerprint.grading_code_digest(packages)
    (packages[0] / "checks" / "__pycache__").mkdir(exist_ok=True)
    (packages[0] / "checks" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (packages[1] / "notes.txt").write_text("scratch")
    assert fingerprint.grading_code_digest(packages) == before


@pytest.mark.parametrize("package", fingerprint.VERSIONED)
def test_upgrading_a_package_changes_the_fingerprint(packages, monkeypatch, package):
    """Does another installed torch, numpy or nbgrader change the fingerprint?"""
    before = fingerprint.grading_code_digest(packages)
    real = fingerprint.version
    monkeypatch.setattr(fingerprint, "version",
                        lambda name: "0.0.1" if name == package else real(name))
    assert fingerprint.grading_code_digest(packages) != before


def test_rerun_regrades_everything_when_the_grading_code_changed(tmp_path, monkeypatch, packages):
    """Does a rerun skip what it graded, and regrade every submission once the grading code
    (here: a hidden check of another section, and a course helper) has changed?"""
    students = ["empty-folder", "empty-student", "invalid-json"]  # graded without a kernel
    root = planted.build(tmp_path / "subs", students)
    out = tmp_path / "out"
    options = Options(jobs=1, progress=False)
    monkeypatch.setattr(run, "grading_code_digest",
                        lambda: fingerprint.grading_code_digest(packages))
    assert autograde(root, out, options).graded == len(students)
    again = autograde(root, out, options)
    assert (again.graded, again.skipped) == (0, len(students))
    for edited in ("grader/checks/s10_3/multi_head_attention.py", "course/example.py"):
        path = packages[0].parent / edited
        path.write_text(path.read_text() + "\n# edited\n")
        changed = autograde(root, out, options)
        assert (changed.graded, changed.skipped) == (len(students), 0), edited
