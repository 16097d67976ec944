"""Results of a grading run: one JSON file per submission, grades.csv, feedback notes.

Each graded submission leaves ``OUT/results/<student>/<assignment>.json`` (written
atomically when it completes, so an interrupted run loses nothing already graded).
``grades.csv`` is always rebuilt from those files, sorted by student and assignment, so
the same results give the same bytes however they were produced (serial, parallel,
sharded and merged).
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

OK, ERROR, FLAGGED = "ok", "error", "flagged"

#: Columns before the exercises' points, and after them.
HEAD = ["student_id", "assignment", "score", "max_score"]
TAIL = ["status", "reason", "submitted_at", "seconds_late", "late", "device", "torch"]


@dataclass
class Result:
    """The outcome for one student and one assignment."""

    student_id: str
    assignment: str
    status: str = OK
    reason: str = ""
    score: float = 0.0
    max_score: float = 0.0
    points: dict[str, float] = field(default_factory=dict)  # exercise -> points
    max_points: dict[str, float] = field(default_factory=dict)
    submitted_at: str = ""
    seconds_late: float = 0.0
    device: str = ""
    torch: str = ""
    notes: list[str] = field(default_factory=list)  # everything worth knowing, in full
    flags: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # the grader's own, not the answer's
    feedback: list[str] = field(default_factory=list)  # paths relative to OUT
    content_hash: str = ""
    elapsed_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # seconds per grading step
    retry: bool = False  # the failure was the grader's, not the submission's: regrade on rerun

    @property
    def key(self) -> tuple[str, str]:
        return self.student_id, self.assignment

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls(**json.loads(text))

    def sound(self) -> bool:
        """Whether the result adds up (a damaged or hand-edited file does not: regraded)."""
        return (self.status in (OK, ERROR, FLAGGED) and bool(self.content_hash)
                and abs(self.score - sum(self.points.values())) < 1e-9
                and abs(self.max_score - sum(self.max_points.values())) < 1e-9
                and set(self.points) <= set(self.max_points))


def short(text: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def number(value: float) -> str:
    """Points as a spreadsheet reads them: 2, 1.5, 0."""
    return f"{value:g}"


# ---------------------------------------------------------------- files


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` is either absent, the old content, or all of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def result_path(out: Path, student: str, assignment: str) -> Path:
    return out / "results" / student / f"{assignment}.json"


def save_result(out: Path, result: Result) -> None:
    atomic_write(result_path(out, result.student_id, result.assignment), result.to_json())


def load_results(out: Path, damaged: list[Path] | None = None) -> dict[tuple[str, str], Result]:
    """Every sound result under ``OUT/results``. Unreadable files (a crash mid-write), results
    that do not add up and files in another student's place are left out (and listed in
    ``damaged``): a rerun grades those submissions again and rewrites them."""
    results = {}
    for path in sorted((out / "results").glob("*/*.json")):
        try:
            result = Result.from_json(path.read_text(encoding="utf-8"))
        except (ValueError, TypeError, AttributeError):
            result = None
        if result is None or not result.sound() or path != result_path(out, *result.key):
            if damaged is not None:
                damaged.append(path)
            continue
        results[result.key] = result
    return results


# ---------------------------------------------------------------- grades.csv


def csv_text(results: list[Result], exercises: list[str]) -> str:
    """grades.csv: one row per student and assignment, sorted; exercises in course order."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEAD + exercises + TAIL)
    for r in sorted(results, key=lambda r: r.key):
        writer.writerow(
            [r.student_id, r.assignment, number(r.score), number(r.max_score)]
            + [number(r.points[e]) if e in r.points else "" for e in exercises]
            + [r.status, short(r.reason), r.submitted_at, number(round(r.seconds_late)),
               "yes" if r.seconds_late > 0 else "no", r.device, r.torch])
    return buffer.getvalue()


def write_grades(out: Path, results: list[Result], exercises: list[str]) -> Path:
    path = out / "grades.csv"
    atomic_write(path, csv_text(results, exercises))
    return path


# ---------------------------------------------------------------- feedback


NOTE_STYLE = ("margin:1em 0;padding:.8em 1em;border:2px solid {color};border-radius:6px;"
              "background:{background};font-family:sans-serif")


def note_html(result: Result) -> str:
    """A box for the top of a feedback page: what the grader did beyond running the tests."""
    lines = [*(f"Integrity: {flag}" for flag in result.flags), *result.notes]
    if not lines:
        return ""
    flagged = result.status == FLAGGED
    color, background = ("#b00020", "#fdecea") if flagged else ("#8a6d00", "#fff8e1")
    title = ("This submission was flagged for review; the exercises named below earned no "
             "credit." if flagged else "Notes from the grader")
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    style = NOTE_STYLE.format(color=color, background=background)
    return (f'<div class="course-grader-note" style="{style}">'
            f"<strong>{html.escape(title)}</strong><ul>{items}</ul>"
            f"<p>Score after these checks: {number(result.score)} / "
            f"{number(result.max_score)}.</p></div>")


def add_note(page: str, note: str) -> str:
    """Insert ``note`` at the start of the page body (or prepend it)."""
    if not note:
        return page
    marker = page.find("<body")
    if marker >= 0:
        end = page.find(">", marker) + 1
        return page[:end] + note + page[end:]
    return note + page
