"""The files a learner's kernel leaves for the grading worker: their one definition.

As ``grader/autograde/messages.py`` is for the pipe between the grader's host and its
workers, this module is for the folder between the kernel and the worker. While a class is
graded, ``python -m grader autograde`` names a folder in ``COURSE_GRADING_DIR``; the checks
that run in the learner's kernel leave two kinds of file there, and the worker reads them
once the notebook has run:

* ``<exercise>.record.pt`` (:func:`save_record`, :func:`load_record`): a hidden check's
  learner outputs for every case, its flags, device and torch version, verified again in a
  clean process (``grader.autograde.worker.verify``);
* ``<exercise>.<side>.outcome.json`` (:func:`save_outcome`, :func:`outcome_name`): how the
  visible or the hidden check ended, and the mistake it named, for the class report
  (``grader.autograde.worker.outcomes``).

Learner code runs in that kernel and can write anything there: records are loaded without
running pickled code, outcome files are read size-bounded and validated by their reader.
Outside grading (no ``COURSE_GRADING_DIR``) nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from course.checking.failure import CheckFailure, NotAttempted

#: Set by the grader while it grades: the folder of the files below.
GRADING_DIR_ENV = "COURSE_GRADING_DIR"
RECORD_SUFFIX = ".record.pt"
OUTCOME_SUFFIX = ".outcome.json"


def grading_dir() -> Path | None:
    """Where the files go while grading, or None when a learner runs the notebook."""
    value = os.environ.get(GRADING_DIR_ENV)
    return Path(value) if value else None


def record_name(exercise: str) -> str:
    return f"{exercise}{RECORD_SUFFIX}"


def outcome_name(exercise: str, side: str) -> str:
    return f"{exercise}.{side}{OUTCOME_SUFFIX}"


def save_record(exercise: str, passed: bool, flags: list[str], device: torch.device,
                cases: dict[str, dict[str, torch.Tensor]]) -> None:
    """Write a hidden check's record when grading; do nothing otherwise."""
    folder = grading_dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"exercise": exercise, "passed": passed, "flags": list(flags),
               "device": str(device), "torch": str(torch.__version__), "cases": cases}
    torch.save(payload, folder / record_name(exercise))


def load_record(path: Path) -> dict:
    """A saved record, loaded without running any pickled code."""
    return torch.load(path, map_location="cpu", weights_only=True)


def save_outcome(exercise: str, side: str, failure: CheckFailure | None) -> None:
    """While grading, note how ``side`` ("visible" or "hidden") of a check ended; else nothing."""
    folder = grading_dir()
    if folder is None:
        return
    status = ("passed" if failure is None else
              "not attempted" if isinstance(failure, NotAttempted) else "failed")
    mistake = getattr(failure, "mistake", None)
    payload = {"exercise": exercise, "side": side, "status": status,
               "mistake": None if mistake is None else
               {"name": mistake.name, "description": mistake.description},
               "message": "" if failure is None else str(failure)[:2000]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / outcome_name(exercise, side)).write_text(json.dumps(payload))
