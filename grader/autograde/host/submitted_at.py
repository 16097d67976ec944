"""Submission times of an LMS zip: ``autograde ... --submitted-at FILE``.

An LMS's submissions zip carries no times (Canvas's only a ``late_`` marker), so the course's
late policy cannot be applied to it from the zip alone. ``FILE`` is a CSV the instructor
downloads beside it, one row per student, with the student's LMS id and the time:

* the id: ``user_id`` / ``ID`` / ``canvas_id`` (Canvas's numeric user id, as in the zip's file
  names), ``Identifier`` (Moodle's grading worksheet: ``Participant 101``) or
  ``participant_id``, or ``student_id`` (the student's folder name);
* the time: ``submitted_at`` (Canvas's submissions API and reports) or ``Last modified
  (submission)`` (Moodle's grading worksheet); ``-`` or empty: not submitted. A time
  without an offset is UTC, as ``--deadline``'s is.

Headers are matched loosely (case, spaces, brackets). Every id that matches no student of
the batch, and every handed-in submission without a time, is reported: nothing is dropped.
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.autograde.host.submissions import Submission, parse_timestamp
from grader.errors import UsageError

#: Normalised header -> which id it holds (the key of a result's ``lms`` dict, or the folder).
ID_COLUMNS = {"user_id": "user_id", "id": "user_id", "canvas_id": "user_id",
              "identifier": "participant_id", "participant_id": "participant_id",
              "student_id": "student"}
TIME_COLUMNS = ("submitted_at", "last_modified_submission")
NOT_SUBMITTED = {"", "-", "never", "no submission"}


def header(name: str) -> str:
    """``Last modified (submission)`` -> ``last_modified_submission``."""
    return "_".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


@dataclass
class SubmittedAt:
    """The times of one batch, by (student, assignment), and what did not match."""

    path: Path
    sha256: str
    times: dict[tuple[str, str], str] = field(default_factory=dict)  # ISO, UTC
    unknown: list[str] = field(default_factory=list)  # rows matching no student of the batch
    missing: list[str] = field(default_factory=list)  # submissions without a time

    def text(self) -> list[str]:
        lines = []
        if self.unknown:
            lines.append(f"in {self.path.name}, no student of this batch, not used ({len(self.unknown)}): "
                         + ", ".join(self.unknown) + " — check that the file is this assignment's")
        if self.missing:
            lines.append(f"no time in {self.path.name}, no late penalty ({len(self.missing)}): "
                         + ", ".join(self.missing) + " — add their rows and grade again")
        return lines


def read_rows(path: Path) -> list[tuple[str, str, str]]:
    """(id kind, id, time) of every row of ``path``, checked."""
    if not path.is_file():
        raise UsageError(f"--submitted-at {path}: no such file.")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        names = {h: header(h) for h in reader.fieldnames or []}
        ids = [h for h, n in names.items() if n in ID_COLUMNS]
        times = [h for h, n in names.items() if n in TIME_COLUMNS]
        if not ids or not times:
            raise UsageError(f"--submitted-at {path}: expected a column of LMS ids ({', '.join(ID_COLUMNS)}) "
                             f"and one of submission times ({', '.join(TIME_COLUMNS)}); its columns: "
                             f"{', '.join(names)}.")
        id_column, time_column = ids[0], times[0]
        rows = []
        for row in reader:
            ident = (row.get(id_column) or "").strip()
            if ident:
                kind = ID_COLUMNS[names[id_column]]
                if kind == "participant_id":  # Moodle's "Participant 101"
                    ident = re.sub(r"^participant\s*", "", ident, flags=re.I)
                rows.append((kind, ident, (row.get(time_column) or "").strip()))
    return rows


def read_submitted_at(path: Path, subs: list[Submission], lms: dict[tuple[str, str], dict]) -> SubmittedAt:
    """The times of ``path`` for the batch ``subs`` (one assignment), by its LMS ids ``lms``."""
    path = Path(path).resolve()
    found = SubmittedAt(path, hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "")
    rows = read_rows(path)
    assignments = sorted({s.assignment for s in subs})
    if len(assignments) != 1:
        raise UsageError(f"--submitted-at holds one assignment's times; this batch has "
                         f"{', '.join(assignments)}: name it with --assignment.")
    by_id = {}
    for sub in subs:
        by_id[("student", sub.student)] = sub.key
        for kind in ("user_id", "participant_id"):
            if lms.get(sub.key, {}).get(kind):
                by_id[(kind, lms[sub.key][kind])] = sub.key
    for kind, ident, when in rows:
        if when.lower() in NOT_SUBMITTED:
            continue
        key = by_id.get((kind, ident))
        if key is None:
            found.unknown.append(f"{ident} ({kind})")
            continue
        try:
            found.times[key] = parse_timestamp(when).isoformat()
        except (ValueError, OverflowError):
            raise UsageError(f"--submitted-at {path}: cannot read the time {when!r} of {ident}; "
                             "expected e.g. 2026-12-01T23:59:00Z.") from None
    found.missing = [s.student for s in subs if s.submitted and not s.problem and s.key not in found.times
                     and "timestamp.txt" not in s.files]  # a folder's own time counts
    return found
