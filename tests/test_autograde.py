"""Grading a whole class: ``python -m grader autograde`` on planted submissions of 10.1.

One batch grades every planted submission (tests/submissions/planted.py) once, with two
workers; most tests read its grades.csv, results and feedback. A few small runs check
serial grading, interruption and resuming, shards and merging.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from grader import report
from grader.autograde import Options, autograde, heaviest_first
from grader.merge import merge
from grader.sandbox import Limits, SandboxConfig, _readable_by, kernel_env, probe, resolve_user
from grader.submissions import (
    Submission,
    content_hash,
    course_assignments,
    discover,
    extract_zip,
    parse_shard,
    parse_timestamp,
    shard,
)
from tests.submissions import planted

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 20  # per cell: long enough for a loaded CI machine to import torch
OPTIONS = dict(timeout=TIMEOUT, memory_mb=2500, deadlines={"*": planted.DEADLINE}, progress=False)
SMALL = ["correct", "syntax-error"]


def rows_of(csv_text: str) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(csv_text))}


def lines_of(csv_text: str, students: list[str]) -> list[str]:
    lines = csv_text.splitlines()
    return [lines[0]] + [line for line in lines[1:] if line.split(",")[0] in students]


def shared_dir(tmp_path_factory, request) -> Path:
    """A folder all pytest-xdist workers of the session see (the session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


@pytest.fixture(scope="session")
def cache(tmp_path_factory, request) -> Path:
    """Template gradebooks and the sandbox check, shared by every run of the session."""
    path = shared_dir(tmp_path_factory, request) / "autograde-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def batch(tmp_path_factory, request, cache):
    """Every planted submission graded once, two at a time (once per session, even when
    pytest-xdist spreads these tests over several processes)."""
    from filelock import FileLock

    shared = shared_dir(tmp_path_factory, request)
    root, out, done = shared / "planted", shared / "graded", shared / "autograde-batch.json"
    with FileLock(str(shared / "autograde-batch.lock")):
        if not done.exists():
            started = time.monotonic()
            summary = autograde(planted.build(root), out, Options(jobs=2, cache=cache, **OPTIONS))
            done.write_text(json.dumps({"graded": summary.graded, "counts": summary.counts,
                                        "text": summary.text(),
                                        "elapsed": time.monotonic() - started}))
        summary = json.loads(done.read_text())
    text = (out / "grades.csv").read_text()
    return {"root": root, "out": out, "summary": summary, "csv": text, "rows": rows_of(text),
            "results": report.load_results(out), "elapsed": summary["elapsed"]}


# ---------------------------------------------------------------- what each one gets

EXPECTED = {
    # student: (qkv_projections, QKVProjection, status, words in the reason); None = no points
    "correct": (2, 2, "ok", ""),
    "late": (2, 2, "ok", "after the deadline"),
    "wrong-qkv": (0, 0, "ok", ""),
    "infinite-loop": (2, 2, "ok", "timed out"),
    "ignores-interrupt": (2, 2, "error", "fresh kernel"),
    "os-exit": (2, 2, "error", "exit code 3"),
    "segfault": (2, 0, "error", "SIGSEGV"),
    "kills-grader": (None, None, "error", "grading worker died"),
    "memory-bomb": (2, 2, "ok", "MemoryError"),
    "output-flood": (2, 2, "ok", "output was cut"),
    "syntax-error": (2, 0, "ok", "SyntaxError"),
    "exception-outside": (2, 2, "ok", "ValueError"),
    "stderr-warnings": (2, 2, "ok", ""),
    "test-deleted": (0, 0, "ok", "restored"),
    "test-edited": (2, 0, "ok", "had been edited"),
    "test-stripped": (0, 0, "ok", "restored"),
    "test-pasted-twice": (2, 2, "ok", "appears twice"),
    "invalid-json": (None, None, "error", "not a valid notebook"),
    "wrong-name": (None, None, "error", "self_attention (1).ipynb instead of"),
    "missing-notebook": (None, None, "error", "no self_attention.ipynb"),
    "empty-folder": (None, None, "error", "folder is empty"),
    "empty-student": (None, None, "error", "no submission"),
    "cheat-allclose": (0, 0, "flagged", "torch.allclose was replaced"),
    "cheat-numpy": (0, 0, "flagged", "numpy.testing.assert_allclose was replaced"),
    "cheat-fake-grader": (0, 0, "flagged", "saved no record"),
    "cheat-edit-checks": (0, 2, "flagged", "in a clean process"),
    "cheat-skip-check": (0, 2, "flagged", "saved no record"),
    "cheat-reference": (0, 2, "flagged", "calls torch.nn.functional.linear"),
}


def test_catalogue_is_complete():
    """Does every planted submission have an expected outcome?"""
    assert set(EXPECTED) == set(planted.PLANTED)


def test_every_student_gets_one_row(batch):
    """Does every student, however broken their folder, get exactly one row?"""
    lines = batch["csv"].splitlines()[1:]
    assert len(lines) == len(planted.PLANTED)
    assert set(batch["rows"]) == set(planted.PLANTED)
    assert batch["summary"]["graded"] == len(planted.PLANTED)


def test_columns(batch):
    """Does grades.csv have ids, score, the exercises' points, status, reason, lateness, device?"""
    header = batch["csv"].splitlines()[0].split(",")
    assert header == ["student_id", "assignment", "score", "max_score", "qkv_projections",
                      "QKVProjection", "status", "reason", "submitted_at", "seconds_late", "late",
                      "device", "torch"]


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_planted_submission(batch, student):
    """Does each planted submission get the points, status and reason it deserves?"""
    qkv, module, status, words = EXPECTED[student]
    row = batch["rows"][student]
    assert row["status"] == status, row["reason"]
    assert words in row["reason"], row["reason"]
    if qkv is None:
        assert row["score"] == "0" and row["qkv_projections"] == ""
        return
    assert (row["qkv_projections"], row["QKVProjection"]) == (str(qkv), str(module)), row["reason"]
    assert row["score"] == str(qkv + module) and row["max_score"] == "4"


def test_lateness(batch):
    """Is a timestamp after the deadline recorded (and one before it not)?"""
    late, on_time = batch["rows"]["late"], batch["rows"]["correct"]
    assert (late["late"], late["seconds_late"], late["submitted_at"]) == \
        ("yes", "5460", "2026-12-02T01:30:00")
    assert (on_time["late"], on_time["seconds_late"]) == ("no", "0")


def test_device_and_torch(batch):
    """Does every graded row name the device and torch version the checks ran with?"""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for student, row in batch["rows"].items():
        if EXPECTED[student][0] is not None:
            assert row["device"].startswith(device) and row["torch"] == torch.__version__, student


def test_feedback_pages(batch):
    """Does every graded notebook get a feedback page with the diagnosis, minus hidden tests?"""
    out = batch["out"]
    for student, (qkv, _, _, _) in EXPECTED.items():
        page = out / "feedback" / student / planted.ASSIGNMENT / "self_attention.html"
        assert page.is_file() == (qkv is not None), student
    text = (out / "feedback" / "cheat-edit-checks" / planted.ASSIGNMENT /
            "self_attention.html").read_text()
    assert "BEGIN HIDDEN TESTS" not in text and "Score: 2.0 / 4.0" in text
    wrong = (out / "feedback" / "wrong-qkv" / planted.ASSIGNMENT / "self_attention.html")
    assert "VisibleCheckFailure" in wrong.read_text()


@pytest.mark.parametrize("student", [s for s in EXPECTED if s.startswith("cheat-")])
def test_flag_reaches_the_feedback(batch, student):
    """Does the feedback of a flagged submission say so, with the reason?"""
    page = batch["out"] / "feedback" / student / planted.ASSIGNMENT / "self_attention.html"
    text = page.read_text()
    assert "course-grader-note" in text and "flagged for review" in text
    assert EXPECTED[student][3].split()[0] in text


def test_diagnosis_in_feedback(batch):
    """Does a hidden check's diagnosis reach the learner (cheat-reference: the forbidden call)?"""
    page = batch["out"] / "feedback" / "cheat-reference" / planted.ASSIGNMENT / "self_attention.html"
    assert "No credit for qkv_projections" in page.read_text()


def test_results_are_complete_json(batch):
    """Is each result saved as JSON with the timings of its steps?"""
    for (student, _), result in batch["results"].items():
        assert result.content_hash, student
        if EXPECTED[student][0] is not None:
            assert {"autograde", "feedback", "verify"} <= set(result.timings), student


def test_summary(batch):
    """Does the summary count what happened, and say how the kernels were sandboxed?"""
    summary = batch["summary"]
    counts = {s: sum(1 for e in EXPECTED.values() if e[2] == s) for s in ("ok", "error", "flagged")}
    assert summary["counts"] == counts
    text = summary["text"]
    assert f"Graded {len(EXPECTED)} submission(s)" in text and "Sandbox:" in text
    print(text, f"\nbatch took {batch['elapsed']:.0f} s")


# ---------------------------------------------------------------- runs, reruns, shards


def test_interrupted_then_resumed_serial_run(batch, tmp_path, cache):
    """Does an interrupted serial run keep what it graded, and does a rerun finish the rest
    with the same rows as the parallel batch?"""
    root = planted.build(tmp_path / "subs", SMALL)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "grader", "autograde", str(root), "--out", str(out),
               "--jobs", "1", "--timeout", str(TIMEOUT), "--memory-mb", "2500", "--quiet",
               "--deadline", planted.DEADLINE]
    process = subprocess.Popen(command, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(out.glob("results/*/*.json")) and time.monotonic() < deadline:
        time.sleep(0.5)
    os.killpg(process.pid, signal.SIGKILL)  # a crash, not a polite stop
    process.wait()
    saved = report.load_results(out)
    assert 1 <= len(saved) <= len(SMALL)
    assert rows_of((out / "grades.csv").read_text()).keys() == {s for s, _ in saved}
    summary = autograde(root, out, Options(jobs=1, cache=cache, **OPTIONS))
    assert summary.skipped == len(saved) and summary.graded == len(SMALL) - len(saved)
    assert lines_of((out / "grades.csv").read_text(), SMALL) == lines_of(batch["csv"], SMALL)


def test_rerun_skips_unchanged_and_regrades_changed(batch, cache):
    """Does a rerun skip unchanged submissions (retrying only the grader's own failures), and
    does a changed file change the content hash?"""
    retried = sorted(s for (s, _), r in batch["results"].items() if r.retry)
    assert retried == ["kills-grader"]  # the grader's failure, not a grade: tried again
    summary = autograde(batch["root"], batch["out"], Options(jobs=2, cache=cache, **OPTIONS))
    assert summary.graded == len(retried)
    assert summary.skipped == len(planted.PLANTED) - len(retried)
    assert (batch["out"] / "grades.csv").read_text() == batch["csv"]
    subs = discover(batch["root"], course_assignments(ROOT / "solutions"))
    digests = {s.key: content_hash(s, "context") for s in subs}
    path = batch["root"] / "correct" / planted.ASSIGNMENT / "timestamp.txt"
    original = path.read_text()
    try:
        path.write_text(planted.LATE)
        changed = {s.key: content_hash(s, "context")
                   for s in discover(batch["root"], course_assignments(ROOT / "solutions"))}
    finally:
        path.write_text(original)
    assert [k for k in digests if digests[k] != changed[k]] == [("correct", planted.ASSIGNMENT)]


def test_shards_merge_into_the_unsharded_csv(batch, tmp_path, cache):
    """Do shard outputs merge into the grades.csv an unsharded run writes?"""
    names = ["correct", "invalid-json", "wrong-name", "empty-folder", "empty-student"]
    root = planted.build(tmp_path / "subs", names)
    outs = []
    for k in (1, 2):
        outs.append(tmp_path / f"shard{k}")
        autograde(root, outs[-1], Options(jobs=1, shard=(k, 2), cache=cache, **OPTIONS))
    shard_rows = [set(rows_of((o / "grades.csv").read_text())) for o in outs]
    assert not shard_rows[0] & shard_rows[1] and shard_rows[0] | shard_rows[1] == set(names)
    merged = merge(outs, tmp_path / "merged")
    assert lines_of(merged.read_text(), names) == lines_of(batch["csv"], names)
    assert merged.read_text() == "\n".join(lines_of(batch["csv"], names)) + "\n"
    assert (tmp_path / "merged" / "feedback" / "correct").is_dir()
    with pytest.raises(SystemExit, match="run the missing --shard 2/2"):
        merge(outs[:1], tmp_path / "incomplete")


def test_cli_on_submissions_that_need_no_kernel(tmp_path):
    """Does ``python -m grader autograde`` accept a zip and report rows it could not grade?"""
    root = planted.build(tmp_path / "subs", ["wrong-name", "empty-folder", "invalid-json"])
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
    assert set(rows) == {"wrong-name", "empty-folder", "invalid-json"}


# ---------------------------------------------------------------- pieces


def test_sandbox_keeps_torch_working_and_the_network_out(tmp_path):
    """Does torch import under the limits, and does the kernel see no network where the
    platform allows namespaces?"""
    config, note = resolve_user(SandboxConfig(Limits(cpu_seconds=120, memory_mb=2500)))
    env = kernel_env(tmp_path / "home", tmp_path / "records", 1)
    found = probe(config, env, tmp_path)
    assert found["torch_ok"] and found["torch"] == torch.__version__
    assert found["limits"]["RLIMIT_DATA"] == 2500 * 1024 * 1024
    assert found["limits"]["RLIMIT_CPU"] == 120
    if found["network"].startswith("isolated"):
        assert found["interfaces"] == ["lo"]
    else:
        pytest.skip(f"no network namespace here: {found['network']}")


def test_kernel_environment_is_clean(tmp_path, monkeypatch):
    """Does a kernel get only what it needs (no PYTHONPATH, a fresh HOME, the switches)?"""
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    env = kernel_env(tmp_path / "home", tmp_path / "records", 2)
    assert "PYTHONPATH" not in env and "AWS_SECRET_ACCESS_KEY" not in env
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
    assert (dest / "alice" / planted.ASSIGNMENT / "self_attention.ipynb").is_file()
    assert (dest / "bob" / planted.ASSIGNMENT / "self_attention.ipynb").is_file()
    assert not (tmp_path / "escape.txt").exists()


def test_shards_partition_deterministically(tmp_path):
    """Do the N shards cover every submission exactly once, the same way every time?"""
    root = planted.build(tmp_path, ["empty-student", "empty-folder", "wrong-name"])
    subs = discover(root, course_assignments(ROOT / "solutions"))
    parts = [[s.key for s in shard(subs, k, 2)] for k in (1, 2)]
    assert sorted(parts[0] + parts[1]) == sorted(s.key for s in subs)
    assert parts == [[s.key for s in shard(list(reversed(subs)), k, 2)] for k in (1, 2)]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/2", "3/2", "x"):
        with pytest.raises(SystemExit, match="K/N"):
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
    good = report.Result("a", "x", score=1, max_score=2)
    report.save_result(tmp_path, good)
    broken = report.result_path(tmp_path, "b", "x")
    broken.parent.mkdir(parents=True)
    broken.write_text('{"student_id": "b", ')
    assert list(report.load_results(tmp_path)) == [("a", "x")]
    assert not list(tmp_path.glob("results/a/.*.tmp"))
    assert json.loads(report.result_path(tmp_path, "a", "x").read_text())["score"] == 1
