"""The pool of grading workers, seen from the host: pipes, threads, the queue.

The workers are one process (:mod:`grader.autograde.worker.serve`) that imports the
grading handler (nbgrader and torch) once and forks one worker per job slot. Each slot
has a pipe for jobs and one for answers, one message per line each way
(:mod:`grader.autograde.messages`). Here a thread per slot drives its worker through the
queue; a worker that dies or overruns is killed, its submission gets an error row to
retry, and a fresh worker takes the slot.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from grader.autograde.host.file_guard import Guard
from grader.autograde.host.options import Options
from grader.autograde.host.submissions import Assignment, Submission
from grader.autograde.messages import (
    Failed,
    Graded,
    GradeJob,
    Message,
    Ready,
    TemplateBuilt,
    TemplateJob,
    WorkerSettings,
)
from grader.autograde.sandbox.config import PASSTHROUGH_ENV
from grader.paths import import_roots
from grader.results import Result, grader_failure, settle

WORKER_START_S = 300


def worker_command(slots: str, handler: str) -> list[str]:
    """The worker process (:func:`grader.autograde.worker.serve.main`), importing this
    process's grader and course, and keeping out a slow import nbformat never needs
    (see grader.autograde.host.submissions)."""
    code = (f"import sys; sys.path[:0] = {import_roots()!r}; "
            "sys.modules.setdefault('rfc3987_syntax', None); "
            "from grader.autograde.worker.serve import main; sys.exit(main(sys.argv[1:]))")
    return [sys.executable, "-I", "-c", code, slots, handler]


class WorkerFailed(Exception):
    """The worker process died or overran; the message says which."""


class Worker:
    """One grading worker, seen through its pair of pipes (see :func:`spawn_workers`)."""

    def __init__(self, jobs: int, answers: int, log: Path,
                 process: subprocess.Popen | None = None):
        self.jobs, self.answers, self.log = jobs, answers, log
        self.process = process  # the Popen of the process that forked the workers, on slot 0
        self.pid = 0
        self.buffer = b""

    def start(self, settings: WorkerSettings) -> Worker:
        """Wait until the worker has imported nbgrader and torch, then send the settings."""
        ready = self._read(WORKER_START_S, "starting the grading worker")
        if not isinstance(ready, Ready):
            raise WorkerFailed(f"the grading worker said {type(ready).__name__} instead of Ready")
        self.pid = ready.pid
        self._send(settings)
        return self

    def _send(self, message: Message) -> None:
        try:
            os.write(self.jobs, (message.to_json() + "\n").encode())
        except OSError:
            raise WorkerFailed(f"the grading worker died; see {self.where()}") from None

    def _read(self, timeout: float, what: str) -> Message:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerFailed(f"{what} took more than {timeout:.0f} s")
            ready, _, _ = select.select([self.answers], [], [], remaining)
            if ready:
                chunk = os.read(self.answers, 1 << 20)
                if not chunk:
                    raise WorkerFailed(f"the grading worker died; see {self.where()}")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return Message.from_json(line.decode())

    def where(self) -> str:
        """The log, as a path relative to OUT (reasons must not depend on where OUT is)."""
        return f"{self.log.parent.name}/{self.log.name}"

    def call(self, job: GradeJob | TemplateJob, timeout: float) -> Message:
        self._send(job)
        return self._read(timeout, "grading this submission")

    def kill(self) -> None:
        """Stop the worker now (its kernels die with it: PR_SET_PDEATHSIG)."""
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.close()

    def close(self) -> None:
        """No more jobs: the worker finishes and exits."""
        for fd in (self.jobs, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        self.jobs = self.answers = -1


def spawn_workers(count: int, env: dict[str, str], cwd: Path, log: Path,
                  handler: str) -> list[Worker]:
    """Start ``count`` workers as one process that imports once and forks the others.

    Each worker gets a pipe for jobs and one for answers. Call
    :meth:`Worker.start` on each before use.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    pipes = [(os.pipe(), os.pipe()) for _ in range(count)]  # ((jobs r, w), (answers r, w))
    theirs = [(jobs[0], answers[1]) for jobs, answers in pipes]
    with open(log, "ab") as log_file:
        process = subprocess.Popen(
            worker_command(";".join(f"{r},{w}" for r, w in theirs), handler),
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env, cwd=cwd,
            start_new_session=True, pass_fds=[fd for pair in theirs for fd in pair])
    for pair in theirs:
        for fd in pair:
            os.close(fd)
    return [Worker(jobs[1], answers[0], log, process if i == 0 else None)
            for i, (jobs, answers) in enumerate(pipes)]


def worker_env(work: Path) -> dict[str, str]:
    """The worker's own environment: as clean as the kernels'.

    One CPU thread each: ``--jobs`` workers verify records side by side, and two torch
    thread pools spinning on the same cores cost twenty times the work (measured by
    ``python -m bench --only autograde``, docs/grading.md "Speed").
    """
    home = work / "worker-home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
           "HOME": str(home), "TMPDIR": str(home / "tmp"), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.update({k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ})
    return env


def job_for(sub: Submission, assignment: Assignment, template: Path, digest: str) -> GradeJob:
    return GradeJob(sub.student, sub.assignment, str(sub.folder), tuple(sub.files),
                    tuple(sub.notes), str(assignment.source), str(template), digest,
                    tuple(sub.review), tuple(sub.placed_as.items()))


class Pool:
    """The worker threads' shared state: the queue, the start signal, the results."""

    def __init__(self, settings: WorkerSettings | None, env: dict[str, str], work: Path, logs: Path,
                 options: Options, record: Callable[[Result, str], None],
                 digests: dict[tuple[str, str], str]):
        self.settings, self.env, self.workdir, self.logs = settings, env, work, logs
        self.options, self.record, self.digests = options, record, digests
        self.queue: deque[Submission] = deque()
        self.lock = threading.Lock()  # the queue and what is running
        self.ready = threading.Event()  # sandbox checked, templates built: grade
        self.templates_built = threading.Event()
        self.stop = threading.Event()
        self.unprepared: dict[str, str] = {}
        self.fallback: dict[str, str] = {}
        self.spawned: list[Worker] = []
        # Without a filesystem sandbox: the grader's files, checked after every notebook.
        self.guard: Guard | None = None
        self.running: dict[int, Submission] = {}  # worker index -> its submission
        self.suspects: set[tuple[str, str]] = set()  # graded while the files were changed
        self.serial = False  # one notebook at a time, once a change could not be attributed
        self.turn = threading.Condition(self.lock)

    def next_job(self, index: int) -> Submission | None:
        """The next submission for worker ``index``, or None when it should stop.

        In serial mode only worker 0 goes on, and only when no other notebook is running.
        A worker waits while others still run: a change they find sends work back.
        """
        with self.turn:
            while True:
                if self.serial and index != 0:
                    return None
                if self.queue and not (self.serial and self.running):
                    self.running[index] = sub = self.queue.popleft()
                    return sub
                if not self.running:
                    return None
                self.turn.wait()

    def finish(self, index: int, result: Result, outbox: str = "") -> Result | None:
        """Record worker ``index``'s result, unless the grader's files changed while it ran:
        then put them back, and either flag the one submission that can have done it or
        grade the candidates again one at a time."""
        with self.turn:
            sub = self.running.pop(index)
            changed = self.guard.changes() if self.guard else []
            if changed:
                self.guard.restore()
            if changed and not self.running:  # nothing else ran since the last clean check
                tamper(result, changed)
                self.suspects.discard(sub.key)
            elif changed or sub.key in self.suspects:  # which one did it? grade them alone
                self.suspects |= {s.key for s in self.running.values()} if changed else set()
                self.suspects.discard(sub.key)
                self.serial = True
                self.queue.appendleft(sub)
                result = None
            self.turn.notify_all()
        if result is not None:
            self.record(result, outbox)
        return result

    def error(self, sub: Submission, reason: str) -> Result:
        return grader_failure(sub.student, sub.assignment, self.digests[sub.key], reason)

    def start_worker(self, index: int) -> Worker:
        """A replacement for a worker that died: a process of its own."""
        (worker,) = spawn_workers(1, self.env, self.workdir, self.logs / f"worker-{index}.log",
                                  self.options.handler)
        self.spawned.append(worker)
        return worker.start(self.settings)

    def work(self, index: int, worker: Worker, templates: dict[str, Path],
             assignments: dict[str, Assignment]) -> None:
        """One thread: drive one worker through the queue."""
        try:
            try:
                worker.start(self.settings)
            except WorkerFailed:
                worker.kill()
                worker = None
            if index == 0:
                try:
                    worker = worker or self.start_worker(index)
                    self.unprepared.update(build_templates(worker, templates, assignments,
                                                           self.options))
                except WorkerFailed as failure:
                    self.unprepared.update({name: str(failure) for name in templates})
                finally:
                    self.templates_built.set()
            self.ready.wait()
            while (sub := self.next_job(index)) is not None:
                worker = self.grade(worker, index, sub, templates[sub.assignment],
                                    assignments[sub.assignment])
        finally:
            if worker is not None:
                worker.close()

    def grade(self, worker: Worker | None, index: int, sub: Submission, template: Path,
              assignment: Assignment) -> Worker | None:
        """Grade ``sub`` on ``worker`` (started if needed); returns the worker still usable."""
        if sub.assignment in self.unprepared:
            self.finish(index, self.error(sub, f"could not prepare {sub.assignment} for grading: "
                                               f"{self.unprepared[sub.assignment]}"))
            return worker
        outbox = ""
        try:
            worker = worker or self.start_worker(index)
            answer = worker.call(job_for(sub, assignment, template, self.digests[sub.key]),
                                 self.options.whole_notebook_s())
            if isinstance(answer, Graded):
                result, outbox = answer.result, answer.outbox
            else:
                said = answer.error if isinstance(answer, Failed) else type(answer).__name__
                result = self.error(sub, f"the grader failed: {said}")
        except WorkerFailed as failure:
            if worker is not None:
                worker.kill()
            worker = None
            result = self.error(sub, f"grading stopped: {failure}; its kernel was killed. Rerun "
                                     "the same command to try again")
        if not result.torch and not result.retry:  # no check ran: the kernel's torch all the same
            result.torch = self.fallback.get("torch", "")
            result.device = self.fallback.get("device", "")
        self.finish(index, result, outbox)
        return worker


def tamper(result: Result, changed: list[str]) -> None:
    """Flag a submission that changed the grader's files on disk; it earns nothing."""
    result.flags.append(f"changed the grader's files on disk: {', '.join(changed[:5])}"
                        + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                        + " (put back before any other notebook ran)")
    result.points = {name: 0.0 for name in result.points}
    result.score = 0.0
    settle(result)


def build_templates(worker: Worker, templates: dict[str, Path],
                    assignments: dict[str, Assignment], options: Options) -> dict[str, str]:
    """Build the missing template gradebooks; returns the assignments that failed, with why."""
    failed = {}
    for name, path in templates.items():
        if path.exists():
            continue
        answer = worker.call(TemplateJob(name, str(assignments[name].source),
                                         str(path.parent / "build"), options.deadline(name)),
                             WORKER_START_S)
        if not isinstance(answer, TemplateBuilt):
            failed[name] = answer.error if isinstance(answer, Failed) else type(answer).__name__
            continue
        os.replace(answer.path, path)
        shutil.rmtree(path.parent / "build", ignore_errors=True)
    return failed


def stop_workers(workers: list[Worker], grace: float = 60) -> None:
    """Let the worker processes exit after their last job; kill what is left."""
    for worker in workers:
        worker.close()
    for worker in workers:
        if worker.process is not None:
            try:
                worker.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
