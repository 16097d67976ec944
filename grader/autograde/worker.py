"""A grading worker process, for ``python -m grader autograde``.

``python -I -m grader.autograde.worker SLOTS`` imports nbgrader and torch once (most of a
worker's start-up), then forks one worker per slot; ``SLOTS`` is ``JOBS,ANSWERS;...``, a
pair of inherited pipe descriptors per worker. Each worker reads a settings line, then one
job per line (JSON), and answers each with one JSON line (anything else it or nbgrader
prints goes to stderr, the worker's log). The pool's side is :mod:`grader.autograde.pool`.

The worker itself never runs learner code: nbgrader starts every kernel through the
sandbox launcher (:mod:`grader.autograde.sandbox`). That is why it may also verify the
integrity records (:mod:`grader.autograde.verify`): it is a clean process in the sense the
integrity design needs.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from grader.autograde.job import build_template, grade

# ---------------------------------------------------------------- main loop


def die_with_parent() -> None:
    """Stop when the process that started this one dies: nobody would read the results,
    and an orphan would keep writing into OUT while a rerun does."""
    import ctypes
    import signal

    from grader.autograde.sandbox import PR_SET_PDEATHSIG

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)


def serve(jobs: int, answers: int) -> None:
    """Answer job lines read from fd ``jobs`` with result lines on fd ``answers``."""
    reader = os.fdopen(jobs, "r", encoding="utf-8")
    writer = os.fdopen(answers, "w", encoding="utf-8")

    def answer(payload: dict) -> None:
        writer.write(json.dumps(payload) + "\n")
        writer.flush()

    answer({"ready": True, "pid": os.getpid()})
    settings = json.loads(reader.readline())
    for line in reader:
        job = json.loads(line)
        try:
            if job["type"] == "template":
                reply = build_template(job)
            else:
                reply = {"result": json.loads(grade(job, settings).to_json())}
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            reply = {"error": f"{type(error).__name__}: {error}"}
        answer(reply)


def main(argv: list[str] | None = None) -> int:
    """``python -I -m grader.autograde.worker JOBS,ANSWERS;...``: the fork server.

    This process imports nbgrader and torch once, then forks one worker per slot, each
    with its own pair of pipes, and waits for them. It never grades itself, so learner code
    that kills its kernel's parent stops one worker, not all of them.
    """
    argv = sys.argv[1:] if argv is None else argv
    os.dup2(2, 1)  # stray prints (ours, nbgrader's) go to the log, never to a protocol pipe
    sys.stdout = sys.stderr
    die_with_parent()
    slots = [tuple(int(fd) for fd in pair.split(",")) for pair in argv[0].split(";")]
    import grader.autograde.verify  # noqa: F401 - torch and the checks, before the first job

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
                serve(*slot)
            finally:
                os._exit(0)  # never back into the fork loop, nor the parent's exit handlers
        children.append(pid)
    for slot in slots:
        for fd in slot:
            os.close(fd)
    for pid in children:
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
