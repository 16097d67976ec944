"""One grading job inside a worker (grader/autograde/worker/job.py), the parts that start no
kernel: the scratch course, the status, the scrubbed paths, the outbox. The whole job, with
nbgrader and kernels, is graded end to end in tests/test_autograde.py (slow)."""

from __future__ import annotations

from pathlib import Path

from grader.autograde.messages import GradeJob, GradingOptions, WorkerSettings
from grader.autograde.sandbox.config import SandboxConfig
from grader.autograde.worker import job
from grader.autograde.worker.nbgrader_runs import NbgraderRun
from grader.results import ERROR, Result


def grade_job(tmp_path: Path, source: Path) -> GradeJob:
    folder = tmp_path / "subs" / "s" / "a"
    folder.mkdir(parents=True)
    (folder / "nb.ipynb").write_text("{}")
    (tmp_path / "t.db").write_text("db")
    return GradeJob("s", "a", str(folder), ("nb.ipynb",), ("a note",), str(source),
                    str(tmp_path / "t.db"), "h")


def settings(tmp_path: Path) -> WorkerSettings:
    return WorkerSettings(str(tmp_path / "work" / "jobs"), str(tmp_path / "work" / "outbox"),
                          str(tmp_path / "jupyter"), SandboxConfig(), GradingOptions(), 1,
                          str(tmp_path / "mpl"))


def test_the_scratch_course_is_nbgraders_layout(tmp_path):
    """Does the scratch course hold the source, the template gradebook and the student's
    files where nbgrader autograde looks for them?"""
    source = tmp_path / "src"
    source.mkdir()
    (source / "nb.ipynb").write_text("{}")
    course = job.prepare_course(grade_job(tmp_path, source), tmp_path / "scratch")
    assert (course.root / "solutions" / "a" / "nb.ipynb").is_file()
    assert (course.root / "gradebook.db").read_text() == "db"
    assert (course.root / "submitted" / "s" / "a" / "nb.ipynb").is_file()


def test_a_job_that_fails_is_an_error_to_retry_and_leaves_nothing(tmp_path):
    """When grading raises (here: the source is missing), is the answer an error to retry
    that keeps the job's notes, with scratch paths scrubbed and no scratch left behind?"""
    answer = job.grade(grade_job(tmp_path, tmp_path / "work" / "gone"), settings(tmp_path))
    r = answer.result
    assert (r.status, r.retry, r.content_hash) == (ERROR, True, "h")
    assert r.reason.startswith("the grader failed: FileNotFoundError") and "a note" in r.reason
    assert str(tmp_path / "work") not in r.reason and "<scratch>/gone" in r.reason
    assert answer.outbox == "" and list((tmp_path / "work" / "jobs").iterdir()) == []


def test_nbgraders_own_failure_comes_first_and_is_retried():
    r = Result("s", "a", notes=["cell 2 raised NameError"])
    job.conclude(r, NbgraderRun(Path("."), ok=False, log="ValueError: bad"))
    assert (r.status, r.retry) == (ERROR, True)
    assert r.reason.startswith("nbgrader could not grade this notebook: ValueError: bad")
    job.conclude(r, NbgraderRun(Path("."), ok=False, log="ValueError: bad"))
    assert len(r.failures) == 1  # concluding twice (after feedback) adds it once


def test_pages_and_graded_notebooks_go_to_the_outbox_with_the_note(tmp_path):
    """Are the feedback page (with the grader's note for a flagged row) and the graded
    notebook left in the job's outbox, and nothing written anywhere else?"""
    run = NbgraderRun(tmp_path / "course", ok=True, log="")
    run.feedback("s", "a").mkdir(parents=True)
    (run.feedback("s", "a") / "nb.html").write_text("<html><body><p>page</p></body></html>")
    run.autograded("s", "a").mkdir(parents=True)
    (run.autograded("s", "a") / "nb.ipynb").write_text("{}")
    r = Result("s", "a", status="flagged", flags=["x: calls softmax"])
    outbox = tmp_path / "outbox" / "s-1"
    job.publish(r, run, outbox)
    page = (outbox / "feedback" / "nb.html").read_text()
    assert page.index("course-grader-note") < page.index("<p>page</p>")
    assert "calls softmax" in page and (outbox / "autograded" / "nb.ipynb").is_file()
    assert r.feedback == []  # the host lists the pages once they are in OUT
