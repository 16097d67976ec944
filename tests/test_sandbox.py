"""One notebook cannot zero a class: the kernels' sandbox, the grader's check of its own
files, and grader failures that are never a learner's zero (grader/autograde/sandbox/,
host/file_guard.py, worker/cell_findings.py; the pool's side of the guard is in
tests/autograde/test_pool.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course import progress
from grader import results as report
from grader.autograde.host.file_guard import Guard
from grader.autograde.host.sandbox import readable_paths
from grader.autograde.sandbox.config import SandboxConfig
from grader.autograde.sandbox.launcher import bwrap_args
from grader.autograde.worker.cell_findings import grader_failure
from grader.results import ERROR, FLAGGED, OK, Result
from tests.settings import GRADING, ROOT
from tests.submissions import planted

# ---------------------------------------------------------------- the guard


@pytest.fixture()
def package(tmp_path):
    """A small package with sources and bytecode, to tamper with."""
    folder = tmp_path / "pkg"
    (folder / "sub").mkdir(parents=True)
    (folder / "__init__.py").write_text("X = 1\n")
    (folder / "sub" / "checks.py").write_text("def check():\n    return True\n")
    (folder / "data.tsv").write_text("a\tb\n")
    return folder


def test_guard_sees_and_undoes_every_change(package):
    """Are edited, deleted and added files (bytecode too) reported, and put back exactly?"""
    guard = Guard([package])
    assert guard.changes() == []
    assert list(package.rglob("*.pyc")), "the guard compiles the bytecode up front"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in package.rglob("*") if p.is_file()}
    (package / "sub" / "checks.py").write_text("def check():\n    raise AssertionError\n")
    (package / "data.tsv").unlink()
    next(package.rglob("*.pyc")).write_bytes(b"forged")
    (package / "sub" / "planted.py").write_text("evil = True\n")
    changed = guard.changes()
    assert "pkg/sub/checks.py" in changed and "pkg/data.tsv" in changed
    assert "pkg/sub/planted.py" in changed and any(c.endswith(".pyc") for c in changed)
    guard.restore()
    assert guard.changes() == []
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in package.rglob("*") if p.is_file()}
    assert after == before  # same bytes and times: the bytecode stays valid for its source


# ---------------------------------------------------------------- the sandbox's shape


def test_kernels_read_python_and_the_course_packages_only():
    """Are Python and the course's packages readable, but not the checkout around them
    (solutions/, OUT folders and submissions placed there)?"""
    readable = readable_paths()
    assert str(ROOT / "grader") in readable and str(ROOT / "course") in readable
    assert str(ROOT) not in readable and str(Path.cwd()) not in readable
    assert not any(str(ROOT / "solutions").startswith(p) for p in readable)


def test_bwrap_hides_what_is_hidden_and_binds_what_is_writable(tmp_path):
    """Does the command line cover up hidden folders inside readable ones, bind the kernel's
    own folders writable, leave /etc's secrets out, and end read-only?"""
    out = ROOT / "grader" / "graded"  # an OUT placed, unwisely, inside a readable folder
    config = SandboxConfig(bwrap="/usr/bin/bwrap", readable=(str(ROOT / "grader"),),
                           hidden=(str(out), "/elsewhere/submitted"))
    args = bwrap_args(config, [str(tmp_path)], str(tmp_path))
    joined = " ".join(args)
    assert f"--tmpfs {out}" in joined and "/elsewhere/submitted" not in joined
    assert f"--bind {tmp_path} {tmp_path}" in joined
    assert "--unshare-all" in args and "--share-net" not in args and "--die-with-parent" in args
    assert "shadow" not in joined and "--cap-drop ALL" in joined
    assert args[-1] == "--" and "--remount-ro /" in joined


# ---------------------------------------------------------------- grader failures


def error_output(ename: str, evalue: str, frames: list[str] = ()):
    traceback = [f"\x1b[0;31mFile \x1b[0;32m{f}:12\x1b[0m, in \x1b[0;36mf\x1b[0m" for f in frames]
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=traceback)


@pytest.mark.parametrize("output, words", [
    (error_output("ModuleNotFoundError", "No module named 'grader'"), "could not import"),
    (error_output("ImportError", "cannot import name 's10_1' from 'grader.checks'"),
     "could not import"),
    (error_output("TypeError", "unsupported operand", ["/tmp/ipykernel_1/123.py",
                                                       str(ROOT / "grader/checks/guarded_calls.py")]),
     "crashed"),
])
def test_grader_failures_are_recognised(output, words):
    """Is a test cell that failed because the grading machinery did recognised as such?"""
    assert words in grader_failure("check_x", output)


@pytest.mark.parametrize("output", [
    error_output("CheckFailure", "qkv_projections: Q differs"),
    error_output("AssertionError", "Blocked keys must get a weight of 0"),
    error_output("NotAttempted", "softmax is not written yet"),
    error_output("NotImplementedError", ""),
    error_output("TypeError", "qkv_projections() takes 3 positional arguments",
                 [str(ROOT / "grader/checks/guarded_calls.py"), "/tmp/ipykernel_1/123.py"]),
    error_output("ModuleNotFoundError", "No module named 'einops'"),
])
def test_answers_failures_stay_the_answers(output):
    """Are the learner's own failures (a wrong answer, an error raised in their code, a
    package they lack) never taken for the grader's?"""
    assert grader_failure("check_x", output) is None


# ---------------------------------------------------------------- results on disk


def test_damaged_results_are_left_out_for_regrading(tmp_path):
    """Are unreadable results, results that do not add up and results in another
    student's place left out (so a rerun regrades them), and reported?"""
    good = Result("a", "x", points={"e": 1.0}, max_points={"e": 2.0}, score=1.0, max_score=2.0,
                  content_hash="h")
    report.save_result(tmp_path, good)
    report.save_result(tmp_path, Result("b", "x", points={"e": 1.0}, max_points={"e": 2.0},
                                        score=2.0, max_score=2.0, content_hash="h"))
    report.atomic_write(report.result_path(tmp_path, "c", "x"), good.to_json())  # a's, as c's
    report.atomic_write(report.result_path(tmp_path, "d", "x"), "{")
    damaged: list[Path] = []
    assert list(report.load_results(tmp_path, damaged)) == [("a", "x")]
    assert sorted(p.parent.name for p in damaged) == ["b", "c", "d"]


# ---------------------------------------------------------------- without bubblewrap


def course_copy(tmp_path: Path) -> Path:
    """A course folder of its own (grader, helpers, data, sources), to let a hostile
    notebook rewrite it and a test break it without touching this checkout."""
    course = tmp_path / "course-copy"
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("grader", "course", "data", "solutions", "notebooks"):
        shutil.copytree(ROOT / name, course / name, ignore=ignore)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    return course


def grade_copy(course: Path, submissions: Path, out: Path, *flags: str) -> dict:
    """``python -m grader autograde`` with the copy's grader (this checkout's hidden)."""
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in "
            f"getattr(f, '__module__', '')]; sys.path[:0] = [{str(course)!r}]; "
            "from grader.__main__ import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "COURSE_ROOT": str(course)}
    command = [sys.executable, "-c", code, "autograde", str(submissions), "--out", str(out),
               "--quiet", "--jobs", "2", "--timeout", str(GRADING["timeout"]), "--memory-mb",
               str(GRADING["memory_mb"]), *flags]
    result = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return {r.student_id: r for r in report.load_results(out).values()} | {"stderr": result.stderr}


@pytest.mark.slow
def test_without_bubblewrap_a_rewrite_of_the_checks_is_caught_and_undone(tmp_path):
    """With kernels free to write the grader's files: is the hostile submission flagged with
    what it changed, are the files put back, and does every honest student graded
    alongside or after it keep full marks? (And does a kernel that kills its worker cost
    only its own row, retried later?)"""
    course = course_copy(tmp_path)
    checks = course / "grader" / "checks" / "s10_1" / "__init__.py"  # what the hostile one finds
    before = checks.read_bytes()
    root = planted.build(tmp_path / "subs", ["0-rewrites-checks", "correct", "late", "kills-grader"])
    rows = grade_copy(course, root, tmp_path / "out", "--no-file-sandbox")
    assert "WARNING: kernels' files are NOT isolated" in rows["stderr"]
    hostile = rows["0-rewrites-checks"]
    assert hostile.status == FLAGGED and hostile.score == 0
    assert "changed the grader's files on disk: grader/checks/s10_1/__init__.py" in hostile.reason
    for student in ("correct", "late"):
        full = sum(progress.exercises("10.1").values())  # the exercises and the prediction
        assert (rows[student].score, rows[student].status) == (full, OK), rows[student].reason
    killer = rows["kills-grader"]  # no PID namespace: its worker dies, another takes over
    assert (killer.status, killer.retry) == (ERROR, True) and "worker died" in killer.reason
    assert checks.read_bytes() == before


@pytest.mark.slow
def test_a_broken_grader_is_an_error_to_regrade_never_a_zero(tmp_path):
    """When the grading machinery itself cannot be imported or crashes, is the row an error
    marked for regrading, with the reason, instead of an ok row with 0 points?"""
    course = course_copy(tmp_path)
    checks = course / "grader" / "checks" / "s10_1" / "qkv_projections.py"
    source = checks.read_text()
    assert source.rstrip().splitlines()[-1].startswith("    "), "the graded class must end the file"
    crashing = "\n\n    def cases(self):\n        return super().cases() + 1\n"  # a TypeError
    checks.write_text(source.rstrip() + crashing)
    root = planted.build(tmp_path / "subs", ["correct"])
    row = grade_copy(course, root, tmp_path / "out")["correct"]
    assert (row.status, row.retry) == (ERROR, True), row.reason
    assert "the hidden check of check_qkv_projections crashed (TypeError" in row.reason


@pytest.mark.slow
def test_the_sandbox_probe_sees_an_isolated_kernel(tmp_path):
    """Does a process in the sandbox see its own PID namespace only, only loopback, and the
    grader read-only?"""
    from grader.autograde.host.options import Options
    from grader.autograde.host.sandbox import probe
    from grader.autograde.sandbox.config import kernel_env

    config, notes = Options(memory_mb=2500).sandbox(hidden=[tmp_path])
    if not config.bwrap:
        pytest.skip(f"bubblewrap cannot run here: {notes['files']}")
    found = probe(config, kernel_env(tmp_path / "home", tmp_path / "records", 1), tmp_path)
    assert found["torch_ok"] and not found["grader_writable"]
    assert found["processes"] <= 2 and found["interfaces"] == ["lo"]
    assert notes["files"].startswith("isolated by bubblewrap")


@pytest.mark.slow
def test_orphans_die_with_the_sandbox(tmp_path):
    """Does a process a sandboxed program starts in a new session still die with it?"""
    from grader.autograde.host.options import Options

    config, _ = Options().sandbox()
    if not config.bwrap:
        pytest.skip("bubblewrap cannot run here")
    marker = f"orphan-{os.getpid()}-{time.monotonic_ns()}"
    code = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            f"'import time; time.sleep(30)', '{marker}'], start_new_session=True)")
    args = bwrap_args(config, [str(tmp_path)], str(tmp_path))
    subprocess.run([*args, sys.executable, "-c", code], check=True, timeout=60)
    time.sleep(0.5)
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert found.strip() == ""
