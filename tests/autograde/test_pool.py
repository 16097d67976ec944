"""The host's pool, without processes: does it turn every answer of a worker into one row,
and does it find the submission that changed the grader's files
(grader/autograde/host/pool.py)?"""

from __future__ import annotations

from pathlib import Path

from grader.autograde.host.options import Options
from grader.autograde.host.pool import Pool, WorkerFailed
from grader.autograde.host.submissions import Assignment, Submission
from grader.autograde.messages import Failed, Graded, GradeJob, TemplateBuilt
from grader.results import ERROR, FLAGGED, OK, Result


class FakeGuard:
    """A guard whose files change when a test says so."""

    def __init__(self):
        self.changed: list[str] = []
        self.restored = 0

    def changes(self) -> list[str]:
        return list(self.changed)

    def restore(self) -> None:
        self.changed, self.restored = [], self.restored + 1


class FakeWorker:
    """A worker that answers each job with the next of ``answers`` (an exception is raised)."""

    def __init__(self, *answers):
        self.answers, self.jobs, self.killed = list(answers), [], False

    def call(self, job, timeout):
        self.jobs.append(job)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def kill(self):
        self.killed = True


def pool_with(subs: list[Submission], guard: bool = True) -> tuple[Pool, list[tuple[Result, str]]]:
    recorded: list[tuple[Result, str]] = []
    pool = Pool(None, {}, Path("."), Path("logs"), Options(jobs=1),
                lambda result, outbox: recorded.append((result, outbox)),
                {s.key: "hash" for s in subs})
    pool.guard = FakeGuard() if guard else None
    pool.queue.extend(subs)
    return pool, recorded


def graded(sub: Submission) -> Result:
    return Result(sub.student, sub.assignment, points={"a": 2.0}, max_points={"a": 2.0},
                  score=2.0, max_score=2.0, content_hash="hash", torch="2.x", device="cpu")


ASSIGNMENT = Assignment("x", Path("solutions/x"), ("nb",), (("a", 2.0),))


def grade_one(answer) -> tuple[Result, str, FakeWorker, object]:
    sub = Submission("s", "x", Path("subs/s/x"), ["nb.ipynb"])
    pool, recorded = pool_with([sub], guard=False)
    pool.fallback = {"torch": "2.fallback", "device": "cpu"}
    worker = FakeWorker(answer)
    assert pool.next_job(0) is sub
    left = pool.grade(worker, 0, sub, Path("t.db"), ASSIGNMENT)
    ((result, outbox),) = recorded
    return result, outbox, worker, left


def test_a_graded_answer_is_recorded_with_its_outbox():
    """Is the worker's result recorded as it came, with where its pages wait, and does the
    worker keep its slot?"""
    sub = Submission("s", "x")
    result, outbox, worker, left = grade_one(Graded(graded(sub), "/work/outbox/s-1"))
    assert (result.status, result.score, outbox) == (OK, 2.0, "/work/outbox/s-1")
    assert left is worker and not worker.killed
    (job,) = worker.jobs
    assert isinstance(job, GradeJob) and (job.student, job.files, job.content_hash) == \
        ("s", ("nb.ipynb",), "hash")


def test_a_failed_job_is_an_error_to_retry_never_a_zero():
    """When the handler raised, is the row an error marked for regrading, with the reason,
    and the kernel's torch taken from the sandbox check?"""
    result, outbox, worker, left = grade_one(Failed("KeyError: 'x'"))
    assert (result.status, result.retry, outbox) == (ERROR, True, "")
    assert result.reason == "the grader failed: KeyError: 'x'"
    assert result.torch == ""  # a row to retry carries no torch of its own
    assert left is worker


def test_a_dead_worker_is_killed_and_its_submission_retried():
    """When the worker dies or overruns, is it killed, its slot freed for a fresh one, and the
    submission an error to retry that says what happened?"""
    result, _, worker, left = grade_one(WorkerFailed("grading this submission took more than 1 s"))
    assert worker.killed and left is None
    assert (result.status, result.retry) == (ERROR, True)
    assert "took more than 1 s" in result.reason and "Rerun the same command" in result.reason


def test_an_assignment_that_could_not_be_prepared_fails_its_submissions_only():
    """Without a template for its assignment, is the submission an error to retry, without
    calling the worker?"""
    sub = Submission("s", "x")
    pool, recorded = pool_with([sub], guard=False)
    pool.unprepared = {"x": "TemplateError: broken metadata"}
    worker = FakeWorker()
    assert pool.next_job(0) is sub
    pool.grade(worker, 0, sub, Path("t.db"), ASSIGNMENT)
    ((result, _),) = recorded
    assert worker.jobs == [] and result.retry and "broken metadata" in result.reason


def test_templates_are_built_once_and_failures_named(tmp_path):
    """Does the pool ask for the missing template gradebooks only, move each into place,
    and name the assignment whose build failed?"""
    from grader.autograde.host.pool import build_templates

    built = tmp_path / "build.db"
    built.write_text("db")
    have = tmp_path / "have" / "gradebook.db"
    have.parent.mkdir()
    have.write_text("db")
    want, broken = tmp_path / "want" / "gradebook.db", tmp_path / "broken" / "gradebook.db"
    want.parent.mkdir()
    broken.parent.mkdir()
    worker = FakeWorker(TemplateBuilt(str(built)), Failed("TemplateError: no cells"))
    assignments = {n: Assignment(n, tmp_path, (), ()) for n in ("have", "want", "broken")}
    failed = build_templates(worker, {"have": have, "want": want, "broken": broken},
                             assignments, Options())
    assert [job.assignment for job in worker.jobs] == ["want", "broken"]
    assert want.read_text() == "db" and failed == {"broken": "TemplateError: no cells"}


def test_a_change_made_alone_flags_that_submission():
    """When only one notebook ran since the last clean check, is it flagged with what it
    changed, its points taken, and the files put back before the next one starts?"""
    a, b = Submission("a", "x"), Submission("b", "x")
    pool, recorded = pool_with([a, b])
    assert pool.next_job(0) is a
    pool.guard.changed = ["grader/checks/s10_1.py"]
    pool.finish(0, graded(a))
    assert pool.guard.restored == 1
    ((result, _),) = recorded
    assert result.status == FLAGGED and result.score == 0 and result.points == {"a": 0.0}
    assert "grader/checks/s10_1.py" in result.reason and not result.retry
    assert pool.next_job(0) is b and not pool.serial


def test_a_change_made_alongside_others_grades_them_again_alone():
    """When two notebooks ran at once, are both graded again one at a time, so that the one
    that did it is found, and the other is graded on the restored code?"""
    a, b, c = Submission("a", "x"), Submission("b", "x"), Submission("c", "x")
    pool, recorded = pool_with([a, b, c])
    assert (pool.next_job(0), pool.next_job(1)) == (a, b)
    pool.guard.changed = ["course/checking/failure.py"]
    assert pool.finish(1, graded(b)) is None  # b ran while a also did: not recorded
    assert pool.serial and pool.next_job(1) is None  # only worker 0 goes on, alone
    assert pool.finish(0, graded(a)) is None  # a ran during the change too
    assert list(pool.queue)[:2] == [a, b] and recorded == []
    assert pool.next_job(0) is a
    pool.guard.changed = ["course/checking/failure.py"]  # a does it again, alone this time
    pool.finish(0, graded(a))
    assert pool.next_job(0) is b
    pool.finish(0, graded(b))
    assert pool.next_job(0) is c
    pool.finish(0, graded(c))
    assert [(r.student_id, r.status) for r, _ in recorded] == [("a", FLAGGED), ("b", OK), ("c", OK)]
    assert pool.next_job(0) is None
