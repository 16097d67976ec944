"""How each exercise's checks ended in the notebook, read back for the class report.

While grading, every visible and hidden check leaves ``<exercise>.<side>.outcome.json`` in
the kernel's grading folder (:func:`course.checking.records.save_outcome`): passed, failed
(with the mistake it recognised, if any) or not attempted. :func:`read_outcomes` turns the
two sides into one status and one mistake per exercise, stored in the result.

The files are written by the learner's kernel, so the learner can write anything there:
only the files of the assignment's own exercises are read, regular files of at most
:data:`LIMIT` bytes, and anything malformed is ignored (a forged outcome changes no points;
it can only mislabel its own row in the report).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from course.checking.records import outcome_name
from grader.results import short

SIDES = ("visible", "hidden")
STATUSES = ("passed", "failed", "not attempted")
#: A real outcome file is under 14 KB (a 2,000-character message, JSON-escaped).
LIMIT = 64 * 1024
MISTAKE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")


def read_file(path: Path) -> bytes | None:
    """The bytes of a regular file (no link, no FIFO) of at most LIMIT bytes, else None."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        data = file.read(LIMIT + 1)
    return data if len(data) <= LIMIT else None


def parse_outcome(data: bytes, exercise: str, side: str) -> dict | None:
    """``{"status", "mistake"}`` from one file's bytes, or None unless it is well formed."""
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.get("exercise") != exercise \
            or payload.get("side") != side or payload.get("status") not in STATUSES:
        return None
    mistake = payload.get("mistake")
    if isinstance(mistake, dict) and isinstance(mistake.get("name"), str) \
            and MISTAKE_NAME.fullmatch(mistake["name"]) and isinstance(mistake.get("description"), str):
        mistake = {"name": mistake["name"], "description": short(mistake["description"], 200)}
    else:
        mistake = None
    return {"status": payload["status"], "mistake": mistake}


def combine(visible: dict | None, hidden: dict | None) -> tuple[str, dict | None] | None:
    """One status and mistake from the two sides (the hidden check runs only after the
    visible one passed): failed if either failed, with the hidden check's mistake when it
    named one, else the visible check's."""
    sides = [s for s in (visible, hidden) if s is not None]
    if not sides:
        return None
    statuses = {s["status"] for s in sides}
    status = next(s for s in ("failed", "not attempted", "passed") if s in statuses)
    if status != "failed":
        return status, None
    named = [s["mistake"] for s in (hidden, visible) if s is not None and s["status"] == "failed"
             and s["mistake"] is not None]
    return status, (named[0] if named else None)


def read_outcomes(folder: Path, exercises: list[str]) -> tuple[dict[str, str], dict[str, dict]]:
    """Per exercise of ``exercises`` whose checks ran: its status, and the mistake named."""
    statuses, mistakes = {}, {}
    for exercise in exercises:
        if not MISTAKE_NAME.fullmatch(exercise):
            continue  # not a file name in the folder
        sides = []
        for side in SIDES:
            data = read_file(folder / outcome_name(exercise, side))
            sides.append(None if data is None else parse_outcome(data, exercise, side))
        combined = combine(*sides)
        if combined is None:
            continue
        statuses[exercise], mistake = combined
        if mistake is not None:
            mistakes[exercise] = mistake
    return statuses, mistakes
