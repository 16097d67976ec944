"""A grading worker process, for ``python -m grader autograde``.

``serve.main(["JOBS,ANSWERS;...", HANDLER])`` imports the grading handler (nbgrader and
torch, most of a worker's start-up) once, then forks one worker per slot; each slot is a
pair of inherited pipe descriptors. Each worker answers :class:`Ready`, reads
:class:`WorkerSettings`, then one job per line, and answers each with one line
(:mod:`grader.autograde.messages`); anything else it or nbgrader prints goes to stderr,
the worker's log. The host's side is :mod:`grader.autograde.host.pool`.

``HANDLER`` (``module:attribute``) names what grades: nbgrader by default
(:class:`grader.autograde.worker.job.NbgraderHandler`); a benchmark passes a stand-in of
fixed cost. The worker itself never runs learner code: nbgrader starts every kernel
through the sandbox launcher (:mod:`grader.autograde.sandbox.launcher`). That is why it may
also verify the integrity records (:mod:`grader.autograde.worker.verify`): it is a clean
process in the sense the integrity design needs.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

from grader.autograde.messages import Failed, GradeJob, Message, Ready, TemplateJob, WorkerSettings
from grader.autograde.sandbox.config import PR_SET_PDEATHSIG


def die_with_parent() -> None:
    """Stop when the process that started this one dies: nobody would read the results,
    and an orphan would keep working while a rerun does."""
    import ctypes
    import signal

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)


def load_handler(spec: str):
    """The handler class ``module:attribute`` names."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def serve(jobs: int, answers: int, handler_class) -> None:
    """Answer job lines read from fd ``jobs`` with one line each on fd ``answers``."""
    reader = os.fdopen(jobs, "r", encoding="utf-8")
    writer = os.fdopen(answers, "w", encoding="utf-8")

    def answer(message: Message) -> None:
        writer.write(message.to_json() + "\n")
        writer.flush()

    answer(Ready(os.getpid()))
    settings = Message.from_json(reader.readline())
    assert isinstance(settings, WorkerSettings), settings
    handler = handler_class(settings)
    for line in reader:
        job = Message.from_json(line)
        try:
            if isinstance(job, TemplateJob):
                reply = handler.template(job)
            elif isinstance(job, GradeJob):
                reply = handler.grade(job)
            else:
                raise TypeError(f"not a job: {type(job).__name__}")
        except Exception as error:  # noqa: BLE001 - the host makes it an error row
            traceback.print_exc()
            reply = Failed(f"{type(error).__name__}: {error}")
        answer(reply)


def main(argv: list[str] | None = None) -> int:
    """``SLOTS HANDLER``: the fork server.

    This process imports the handler once, then forks one worker per slot, each with its
    own pair of pipes, and waits for them. It never grades itself, so learner code that
    kills its kernel's parent stops one worker, not all of them.
    """
    argv = sys.argv[1:] if argv is None else argv
    os.dup2(2, 1)  # stray prints (ours, nbgrader's) go to the log, never to a protocol pipe
    sys.stdout = sys.stderr
    die_with_parent()
    slots = [tuple(int(fd) for fd in pair.split(",")) for pair in argv[0].split(";")]
    handler_class = load_handler(argv[1])
    children = []
    for slot in slots:
        pid = os.fork()
        if pid == 0:
            os.setsid()  # its own process group, so it can be stopped alone
            die_with_parent()
            for other in slots:
                if other != slot:
                    for fd in other:
                        os.close(fd)
            try:
                serve(*slot, handler_class)
            finally:
                os._exit(0)  # never back into the fork loop, nor the parent's exit handlers
        children.append(pid)
    for slot in slots:
        for fd in slot:
            os.close(fd)
    for pid in children:
        os.waitpid(pid, 0)
    return 0
