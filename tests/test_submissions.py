"""The grader's pieces that need no kernel: finding submissions, zips, shards, timestamps,
the queue, results on disk, the kernel's environment, the command line's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import results as report
from grader.autograde.host.run import heaviest_first
from grader.autograde.host.sandbox import _readable_by
from grader.autograde.host.submissions import (
    Submission,
    course_assignments,
    discover,
    extract_zip,
    parse_shard,
    parse_timestamp,
    shard,
)
from grader.autograde.sandbox.config import kernel_env
from grader.errors import UsageError
from tests.settings import ROOT
from tests.submissions import planted


def rows_of(csv_text: str) -> dict[str, dict[str, str]]:
    import csv
    import io

    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(csv_text))}


def test_kernel_environment_is_clean(tmp_path, monkeypatch):
    """Does a kernel get only what it needs (this run's grader on its path and nothing else,
    a fresh HOME, the switches)?"""
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    env = kernel_env(tmp_path / "home", tmp_path / "records", 2)
    assert env["PYTHONPATH"] == str(ROOT) and "AWS_SECRET_ACCESS_KEY" not in env  # this grader
    assert env["HOME"] == str(tmp_path / "home") and env["COURSE_QUICK"] == "1"
    assert env["COURSE_GRADING_DIR"] == str(tmp_path / "records")
    assert env["OMP_NUM_THREADS"] == "2"


def test_unreadable_python_keeps_the_grader_user():
    """Is a folder the sandbox user cannot enter detected (so kernels are not started as a
    user that cannot run Python)?"""
    import tempfile

    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    folder.chmod(0o755)
    private = folder / "private"
    private.mkdir(mode=0o700)
    (private / "python").write_text("")
    assert not _readable_by(private / "python", 65534, 65534)
    private.chmod(0o755)
    (private / "python").chmod(0o644)
    assert _readable_by(private / "python", 65534, 65534)


def test_discovery_of_layouts(tmp_path):
    """Are wrapped folders, loose notebooks and unknown assignment folders all reported?"""
    root = tmp_path / "submitted"
    planted.build(root, ["correct"])
    (root / "loose").mkdir()
    planted.write(root, "loose", planted.solved())
    loose_nb = root / "loose" / planted.ASSIGNMENT / "self_attention.ipynb"
    loose_nb.rename(root / "loose" / "self_attention.ipynb")
    (root / "loose" / planted.ASSIGNMENT).rmdir()
    (root / "typo" / "10.1-selfattention").mkdir(parents=True)
    subs = {s.key: s for s in discover(tmp_path, course_assignments(ROOT / "solutions"))}
    assert subs[("correct", planted.ASSIGNMENT)].problem == ""
    assert "not inside its assignment folder" in subs[("loose", planted.ASSIGNMENT)].problem
    assert "unknown assignment folder" in subs[("typo", "10.1-selfattention")].problem
    assert subs[("typo", planted.ASSIGNMENT)].problem == "no submission"


def test_lms_zip_is_rearranged_and_unsafe_paths_ignored(tmp_path):
    """Is a flat Canvas export put in nbgrader's layout, and a path escaping the folder
    skipped?"""
    archive = tmp_path / "canvas.zip"
    body = (ROOT / "notebooks" / planted.ASSIGNMENT / "self_attention.ipynb").read_bytes()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice_12345_67890_self_attention.ipynb", body)
        zf.writestr("bob_late_22_33_self_attention-1.ipynb", body)
        zf.writestr("../escape.txt", "no")
    dest = extract_zip(archive, tmp_path / "x", course_assignments(ROOT / "solutions"))
    assert (dest / "alice-12345" / planted.ASSIGNMENT / "self_attention.ipynb").is_file()
    assert (dest / "bob-22" / planted.ASSIGNMENT / "self_attention.ipynb").is_file()
    assert not (tmp_path / "escape.txt").exists()


def test_shards_partition_deterministically(tmp_path):
    """Do the N shards cover every submission exactly once, the same way every time?"""
    root = planted.build(tmp_path, ["empty-student", "empty-folder", "two-names"])
    subs = discover(root, course_assignments(ROOT / "solutions"))
    parts = [[s.key for s in shard(subs, k, 2)] for k in (1, 2)]
    assert sorted(parts[0] + parts[1]) == sorted(s.key for s in subs)
    assert parts == [[s.key for s in shard(list(reversed(subs)), k, 2)] for k in (1, 2)]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "x"):
        with pytest.raises(UsageError, match="K/N"):
            parse_shard(bad)


def test_queue_starts_with_the_heaviest_assignment():
    """Are assignments worth more points (longer to grade) queued first, each in its own order?"""
    assignments = course_assignments(ROOT / "solutions")
    subs = [Submission(student, name) for student in ("a", "b")
            for name in ("10.1-self-attention", "10.6-encoder-decoder", "10.2-scaled-dot-product-attention")]
    order = [(s.assignment[:4], s.student) for s in heaviest_first(subs, assignments)]
    assert order == [("10.6", "a"), ("10.6", "b"), ("10.2", "a"), ("10.2", "b"),
                     ("10.1", "a"), ("10.1", "b")]


def test_timestamps():
    """Are nbgrader's timestamp formats read as UTC?"""
    assert parse_timestamp("2026-12-02 01:30:00.000000 UTC").isoformat() == \
        "2026-12-02T01:30:00+00:00"
    assert parse_timestamp("2026-12-02T02:30:00+01:00").isoformat() == "2026-12-02T01:30:00+00:00"
    assert parse_timestamp("2026-12-02 01:30:00").tzinfo is not None


def test_results_are_written_atomically(tmp_path):
    """Is a half-written result ignored rather than breaking grades.csv?"""
    good = report.Result("a", "x", points={"e": 1}, max_points={"e": 2}, score=1, max_score=2,
                         content_hash="h")
    report.save_result(tmp_path, good)
    broken = report.result_path(tmp_path, "b", "x")
    broken.parent.mkdir(parents=True)
    broken.write_text('{"student_id": "b", ')
    assert list(report.load_results(tmp_path)) == [("a", "x")]
    assert not list(tmp_path.glob("results/a/.*.tmp"))
    assert json.loads(report.result_path(tmp_path, "a", "x").read_text())["score"] == 1


@pytest.mark.slow  # fresh Python processes that import torch
def test_cli_on_submissions_that_need_no_kernel(tmp_path):
    """Does ``python -m grader autograde`` accept a zip and report rows it could not grade?"""
    root = planted.build(tmp_path / "subs", ["two-names", "empty-folder", "invalid-json"])
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in root.rglob("*"):
            zf.write(path, Path("submitted") / path.relative_to(root))
    result = subprocess.run([sys.executable, "-m", "grader", "autograde", str(archive), "--out",
                             str(tmp_path / "out"), "--quiet"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Graded 3 submission(s)" in result.stdout and "3 errors" in result.stdout
    rows = rows_of((tmp_path / "out" / "grades.csv").read_text())
    assert set(rows) == {"two-names", "empty-folder", "invalid-json"}


@pytest.mark.parametrize("argv, code, words", [
    (["autograde", "SUBS", "--out", "OUT", "--shard", "3/2"], 2, "--shard expects K/N"),
    (["autograde", "SUBS", "--out", "OUT", "--deadline", "soon"], 2, "expected an ISO time"),
    (["autograde", "SUBS", "--out", "OUT", "--assignment", "10.9-nope"], 2, "No assignment"),
    (["autograde", "MISSING", "--out", "OUT"], 1, "neither a folder nor a zip"),
    (["merge", "OUT", "--out", "MERGED"], 1, "has no manifest.json"),
    (["generate", "10.9-nope"], 2, "No assignment '10.9-nope'"),
])
def test_command_line_errors_are_one_line_and_an_exit_code(tmp_path, capsys, argv, code, words):
    """Does a mistake on the command line end in one sentence on stderr and exit 1 or 2,
    not a traceback?"""
    from grader.__main__ import main

    root = planted.build(tmp_path / "subs", ["empty-student"])
    folders = {"SUBS": root, "OUT": tmp_path / "out", "MERGED": tmp_path / "merged",
               "MISSING": tmp_path / "missing"}
    (tmp_path / "out").mkdir()
    assert main([str(folders.get(a, a)) for a in argv]) == code
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and err.count("\n") == 1, err
