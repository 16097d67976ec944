"""Grading a whole class: ``python -m grader autograde`` on planted submissions of 10.1.

One batch (the ``batch`` fixture of conftest.py) grades every planted submission
(tests/submissions/planted.py) once, with two workers; most tests read its grades.csv,
results and feedback. A few small runs check serial grading, interruption and resuming,
shards and merging. All of it starts kernels: the slow tier.
"""

from __future__ import annotations

import ast
import csv
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

from course import progress
from grader import results as report
from grader.autograde.host.fingerprint import content_hash
from grader.autograde.host.options import Options
from grader.autograde.host.run import autograde
from grader.autograde.host.sandbox import probe, resolve_user
from grader.autograde.host.submissions import course_assignments, discover
from grader.autograde.sandbox.config import Limits, SandboxConfig, kernel_env
from grader.errors import MergeError
from grader.merge import merge
from tests.settings import GRADING, ROOT, TIMEOUT
from tests.submissions import planted

pytestmark = pytest.mark.slow
SMALL = ["correct", "syntax-error"]


def rows_of(csv_text: str) -> dict[str, dict[str, str]]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(csv_text))}


def lines_of(csv_text: str, students: list[str]) -> list[str]:
    lines = csv_text.splitlines()
    return [lines[0]] + [line for line in lines[1:] if line.split(",")[0] in students]


# ---------------------------------------------------------------- what each one gets

EXPECTED = {
    # student: (qkv_projections, QKVProjection, status, words in the reason); None = no points
    "correct": (2, 2, "ok", ""),
    "late": (2, 2, "ok", ""),  # lateness is a field (test_lateness), not the reason
    "wrong-qkv": (0, 2, "ok", ""),  # the module's check does not depend on the function's
    "infinite-loop": (2, 2, "ok", "timed out"),
    "ignores-interrupt": (2, 2, "error", "fresh kernel"),
    "os-exit": (2, 2, "error", "(In [ ]): the kernel died while running this cell (exit code 3)"),
    "segfault": (2, 0, "error", "SIGSEGV"),
    "kills-grader": (2, 2, "flagged", "sends signals"),  # its own PID namespace: no harm done
    "memory-bomb": (2, 2, "ok", "MemoryError"),
    "output-flood": (2, 2, "ok", "output was cut"),
    "syntax-error": (2, 0, "ok", "SyntaxError"),
    "exception-outside": (2, 2, "ok", "ValueError"),
    "stderr-warnings": (2, 2, "ok", ""),
    "test-deleted": (0, 2, "ok", "restored"),
    "test-edited": (2, 0, "ok", "had been edited"),
    "test-stripped": (0, 2, "ok", "restored"),
    "test-pasted-twice": (2, 2, "ok", "appears twice"),
    "invalid-json": (None, None, "error", "not a valid notebook"),
    "wrong-name": (2, 2, "flagged", "renamed: self_attention (1).ipynb graded as self_attention.ipynb"),
    "two-names": (None, None, "error", "found Untitled.ipynb, Untitled1.ipynb instead of"),
    "copy1": (2, 2, "flagged", "also handed in self_attention-Copy1.ipynb"),
    "missing-notebook": (None, None, "error", "no self_attention.ipynb"),
    "empty-folder": (None, None, "error", "folder is empty"),
    "empty-student": (None, None, "error", "no submission"),
    "cheat-allclose": (0, 0, "flagged", "torch.allclose was replaced"),
    "cheat-numpy": (0, 0, "flagged", "numpy.testing.assert_allclose was replaced"),
    "cheat-fake-grader": (0, 0, "flagged", "saved no record"),
    "cheat-edit-checks": (0, 2, "flagged", "in a clean process"),
    "cheat-skip-check": (0, 2, "flagged", "saved no record"),
    "cheat-reference": (0, 2, "flagged", "qkv_projections calls linear"),
    # hostile, graded first: each fails to do harm, is flagged, and keeps its honest points
    "0-rewrites-checks": (2, 2, "flagged", "looks up where modules are installed"),
    "0-rewrites-course": (2, 2, "flagged", "looks up where modules are installed"),
    "0-deletes-results": (2, 2, "flagged", "reads /proc"),
    "0-reads-others": (2, 2, "flagged", "reads /proc"),
    "0-writes-outside": (2, 2, "flagged", "uses absolute paths"),
    "0-fills-tmp": (2, 2, "flagged", "uses absolute paths"),
    "0-leaves-orphan": (2, 2, "flagged", "starts processes"),
}
HONEST = [s for s, (qkv, module, status, _) in EXPECTED.items() if status == "ok" and qkv == module == 2]
#: 10.1's points: the two exercises and the prediction (every planted notebook answers it: only
#: tampering that fails every check, both exercises at 0, takes its point too).
POINTS = progress.exercises(planted.ASSIGNMENT.split("-")[0])
TOTAL = sum(POINTS.values())


def expected_score(qkv: int, module: int) -> int:
    return qkv + module + (POINTS["qkv_parameters"] if qkv or module else 0)


def test_catalogue_is_complete():
    """Does every planted submission have an expected outcome?"""
    assert set(EXPECTED) == set(planted.PLANTED)


def test_every_student_gets_one_row(batch):
    """Does every student, however broken their folder, get exactly one row?"""
    lines = batch["csv"].splitlines()[1:]
    assert len(lines) == len(planted.PLANTED)
    assert set(rows_of(batch["csv"])) == set(planted.PLANTED)
    assert batch["summary"]["graded"] == len(planted.PLANTED)


def test_columns(batch):
    """Does grades.csv have ids, score, the exercises' points, status, reason, lateness, device?"""
    header = batch["csv"].splitlines()[0].split(",")
    assert header == ["student_id", "assignment", "score", "raw_score", "late_penalty", "max_score",
                      "qkv_projections", "QKVProjection", "qkv_parameters", "status", "reason",
                      "submitted_at", "seconds_late", "late", "device", "torch", "submitted", "late_source",
                      "in_batch"]


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_planted_submission(batch, student):
    """Does each planted submission get the points, status and reason it deserves?"""
    qkv, module, status, words = EXPECTED[student]
    row = rows_of(batch["csv"])[student]
    assert row["status"] == status, row["reason"]
    assert words in row["reason"], row["reason"]
    if qkv is None:
        assert row["score"] == "0" and row["qkv_projections"] == ""
        return
    assert (row["qkv_projections"], row["QKVProjection"]) == (str(qkv), str(module)), row["reason"]
    assert row["score"] == str(expected_score(qkv, module)) and row["max_score"] == str(TOTAL)


def test_a_kernel_signals_no_one_outside_its_sandbox(batch):
    """Does ``os.kill(os.getppid(), SIGKILL)`` leave the kernel, its bubblewrap and the grading
    worker alive (the kernel has a session of its own), so that the row is the same whatever
    the timing?"""
    row = rows_of(batch["csv"])["kills-grader"]
    nb = nbformat.read(batch["root"] / "kills-grader" / planted.ASSIGNMENT / "self_attention.ipynb", 4)
    ran = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]  # empty cells get no In [n]
    number = next(n for n, c in enumerate(ran, start=1) if "os.getppid" in c.source)
    assert row["reason"] == f"review: cell In [{number}] sends signals to other processes", row["reason"]


def test_lateness(batch):
    """Is a timestamp after the deadline recorded (and one before it not)?"""
    late, on_time = rows_of(batch["csv"])["late"], rows_of(batch["csv"])["correct"]
    assert (late["late"], late["seconds_late"], late["submitted_at"], late["reason"]) == \
        ("yes", "5460", "2026-12-02T01:30:00", "")
    page = batch["out"] / "feedback" / "late" / planted.ASSIGNMENT / "self_attention.html"
    assert "submitted 1.5 h after the deadline" in page.read_text()
    assert (on_time["late"], on_time["seconds_late"]) == ("no", "0")


def test_submitted(batch):
    """Does grades.csv say which rows had no submission (a field, not the reason's words)?"""
    rows = rows_of(batch["csv"])
    assert {s for s, row in rows.items() if row["submitted"] == "no"} == {"empty-student"}


def test_device_and_torch(batch):
    """Does every graded row name the device and torch version the checks ran with?"""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for student, row in rows_of(batch["csv"]).items():
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
    score = f"Score: {float(expected_score(0, 2))} / {float(TOTAL)}"
    assert "BEGIN HIDDEN TESTS" not in text and score in text
    wrong = (out / "feedback" / "wrong-qkv" / planted.ASSIGNMENT / "self_attention.html")
    assert "This looks like K computed with W_q" in wrong.read_text()  # the visible check's diagnosis


def feedback_exporters(tmp_path: Path) -> tuple:
    """nbconvert's HTMLExporter and ours, both configured as nbgrader's feedback sets them up."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    from grader.autograde.messages import GradingOptions
    from grader.autograde.worker.nbgrader_runs import FeedbackPage, course_config

    config = course_config(tmp_path, GradingOptions())
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    return (HTMLExporter(parent=converter, config=converter.config),
            FeedbackPage(parent=converter, config=converter.config))


def render(exporter, nb) -> str:
    """A feedback page of ``nb`` (the scores GetGrades would add), random ids made equal."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        meta.setdefault("comment", "")
        if meta.get("grade"):
            meta["score"] = meta["points"]
    resources = {"nbgrader": {"notebook": "self_attention", "score": 4, "max_score": 4,
                              "late_penalty": 0}}
    html, _ = exporter.from_notebook_node(nb, resources=resources)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "uuid", html)


def test_feedback_page_is_nbconverts_page(batch, tmp_path, monkeypatch):
    """Does skipping nbconvert's second pass (BeautifulSoup: alt text, tabindex) give the
    same page, for every kind of graded notebook, and is the pass kept where it has work?"""
    import nbformat
    from bs4 import BeautifulSoup

    from grader.autograde.worker.nbgrader_runs import FeedbackPage

    stock, ours = feedback_exporters(tmp_path)
    graded = sorted((batch["out"] / "autograded").glob(f"*/{planted.ASSIGNMENT}/*.ipynb"))
    assert len(graded) >= 10
    for path in graded:
        nb = nbformat.read(path, as_version=4)
        page = render(ours, nb)
        assert str(BeautifulSoup(page, features="html.parser")) == render(stock, nb), path
        assert "<img" not in page  # graded kernels draw no figures
    nb.cells[-1].outputs = [nbformat.v4.new_output("display_data", {"image/png": "iVBORw0KGgo="})]
    page = render(ours, nb)
    assert page == render(stock, nb) and 'alt="No description' in page

    def moved(*args, **kwargs):
        raise AttributeError("'FeedbackPage' object has no attribute '_nb_metadata'")

    monkeypatch.setattr(FeedbackPage, "_render", moved)  # a later nbconvert: its own export
    assert render(ours, nb) == render(stock, nb)


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
    summary = autograde(root, out, Options(jobs=1, cache=cache, **GRADING))
    assert summary.skipped == len(saved) and summary.graded == len(SMALL) - len(saved)
    assert lines_of((out / "grades.csv").read_text(), SMALL) == lines_of(batch["csv"], SMALL)


def test_rerun_skips_unchanged_and_regrades_changed(batch, cache, tmp_path):
    """Does a rerun skip unchanged submissions (retrying only the grader's own failures),
    regrade results that were damaged or deleted, and does a changed file change the
    content hash?"""
    retried = sorted(s for (s, _), r in batch["results"].items() if r.retry)
    assert retried == []  # no failure of the grader's own in this batch: nothing to retry
    out = tmp_path / "out"
    shutil.copytree(batch["out"], out)  # other tests read the batch: rerun into a copy
    summary = autograde(batch["root"], out, Options(jobs=2, cache=cache, **GRADING))
    assert summary.graded == len(retried)
    assert summary.skipped == len(planted.PLANTED) - len(retried)
    (out / "results" / "correct" / f"{planted.ASSIGNMENT}.json").write_text('{"score": 4')
    forged = report.load_results(batch["out"])[("late", planted.ASSIGNMENT)]
    forged.score = 99.0  # does not add up
    (out / "results" / "late" / f"{planted.ASSIGNMENT}.json").write_text(forged.to_json())
    (out / "results" / "wrong-qkv" / f"{planted.ASSIGNMENT}.json").unlink()
    (out / "grades.csv").unlink()
    repaired = autograde(batch["root"], out, Options(jobs=2, cache=cache, **GRADING))
    assert (repaired.graded, repaired.damaged) == (3, 2)  # the damaged two and the missing one
    assert (out / "grades.csv").read_text() == batch["csv"]
    root = tmp_path / "subs"
    shutil.copytree(batch["root"], root)
    assignments = course_assignments(ROOT / "solutions")
    digests = {s.key: content_hash(s, "context") for s in discover(root, assignments)}
    (root / "correct" / planted.ASSIGNMENT / "timestamp.txt").write_text(planted.LATE)
    changed = {s.key: content_hash(s, "context") for s in discover(root, assignments)}
    assert [k for k in digests if digests[k] != changed[k]] == [("correct", planted.ASSIGNMENT)]


def test_shards_merge_into_the_unsharded_csv(batch, tmp_path, cache):
    """Do shard outputs merge into the grades.csv an unsharded run writes?"""
    names = ["correct", "invalid-json", "two-names", "empty-folder", "empty-student"]
    root = planted.build(tmp_path / "subs", names)
    outs = []
    for k in (1, 2):
        outs.append(tmp_path / f"shard{k}")
        autograde(root, outs[-1], Options(jobs=1, shard=(k, 2), cache=cache, **GRADING))
    shard_rows = [set(rows_of((o / "grades.csv").read_text())) for o in outs]
    assert not shard_rows[0] & shard_rows[1] and shard_rows[0] | shard_rows[1] == set(names)
    merged = merge(outs, tmp_path / "merged")
    assert lines_of(merged.read_text(), names) == lines_of(batch["csv"], names)
    assert merged.read_text() == "\n".join(lines_of(batch["csv"], names)) + "\n"
    assert (tmp_path / "merged" / "feedback" / "correct").is_dir()
    with pytest.raises(MergeError, match="run the missing --shard 2/2"):
        merge(outs[:1], tmp_path / "incomplete")


# ---------------------------------------------------------------- hostile submissions


def test_hostile_submissions_harm_nobody(batch):
    """Graded first, in the same batch: do the honest students still get full marks, with
    no flag, whatever the hostile ones tried?"""
    rows = rows_of(batch["csv"])
    for student in HONEST:
        assert (rows[student]["score"], rows[student]["status"]) == (str(TOTAL), "ok"), student


def test_grading_code_is_unchanged_after_the_batch(batch):
    """Are the grader, the course helpers and the data byte for byte what they were before
    the batch (the hostile ones wrote nothing)?"""
    assert batch["summary"]["changed"] == []


def test_no_other_students_content_in_hostile_outputs(batch):
    """Does no hostile submission's graded notebook or feedback show another student's
    notebook?"""
    own = batch["out"] / "autograded" / "correct" / planted.ASSIGNMENT / "self_attention.ipynb"
    assert planted.SECRET in own.read_text()  # where it is, the search below would find it
    for student in planted.HOSTILE:
        for folder in ("autograded", "feedback"):
            pages = [p for p in (batch["out"] / folder / student).rglob("*") if p.is_file()]
            assert pages, f"nothing graded for {student}"
            for path in pages:
                assert planted.SECRET not in path.read_text(errors="replace"), path


def test_nothing_written_outside_and_no_process_left_behind(batch):
    """Did no hostile write land outside its own folder, and did every process a kernel
    started die with it?"""
    assert not Path("/tmp/hostile-was-here").exists() and not Path("/tmp", planted.ORPHAN).exists()
    assert not (ROOT / "hostile-was-here").exists()
    found = subprocess.run(["pgrep", "-f", planted.ORPHAN], capture_output=True, text=True)
    assert found.stdout.strip() == "", f"processes left behind: {found.stdout}"


def test_hostile_ones_could_do_nothing(batch):
    """Did the hostile cells themselves see their attempts fail (read nothing, wrote
    nowhere but their own /tmp, stopped at its size)?"""
    def output(student):
        return (batch["out"] / "autograded" / student / planted.ASSIGNMENT /
                "self_attention.ipynb").read_text()

    assert "could not: OSError" in output("0-rewrites-checks")
    assert "could not: OSError" in output("0-rewrites-course")
    assert "found: []" in output("0-reads-others")
    written = re.search(r"written: (\[.*?\])", output("0-writes-outside"))[1]
    assert all(path.startswith("/tmp/") for path in ast.literal_eval(written))  # its own /tmp
    assert "stopped after 512 MB: OSError" in output("0-fills-tmp")


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
