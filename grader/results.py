"""A grading result, as the worker sends it, the host keeps it and every command reads it.

:class:`Result` is one student's outcome for one assignment; :func:`settle` is the one
place its status (ok, error, flagged), retry and reason are decided. Each result lives in
``OUT/results/<student>/<assignment>.json`` (written atomically by the host when it
completes, so an interrupted run loses nothing already graded; :func:`load_results` reads
them back). ``grades.csv`` rows come from :func:`csv_rows`, sorted by student and
assignment in the finished file, so the same results give the same bytes however they
were produced (serial, parallel, sharded and merged).

Adding a field: give it a default; old result files load with it, and the JSON of a new
one round-trips (``Result.from_json(r.to_json()) == r``).
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

OK, ERROR, FLAGGED = "ok", "error", "flagged"
#: The problem of a student of the batch without a folder for the assignment.
NO_SUBMISSION = "no submission"

#: Columns before the exercises' points, and after them. ``score`` is the points after the
#: late penalty, ``raw_score`` before it (the sum of the exercises' points).
HEAD = ["student_id", "assignment", "score", "raw_score", "late_penalty", "max_score"]
#: ``submitted`` (yes/no) came last, after ``torch``, so readers of older files by position
#: still find every earlier column where it was.
#: ``late_source`` (grader.late: timestamp.txt, submitted-at, none) came after it, then
#: ``in_batch`` (no: a row kept from an earlier run whose student the latest batch lacked).
TAIL = ["status", "reason", "submitted_at", "seconds_late", "late", "device", "torch", "submitted",
        "late_source", "in_batch"]


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
    outcomes: dict[str, str] = field(default_factory=dict)  # exercise -> passed, failed, not attempted
    mistakes: dict[str, dict] = field(default_factory=dict)  # exercise -> {"name", "description"}
    late_penalty: float = 0.0  # points taken by the course's late policy (grader.late)
    lms: dict[str, str] = field(default_factory=dict)  # what the LMS said: user id, late marker
    submitted: bool = True  # False: the batch has the student but not this assignment
    late_source: str = ""  # what the lateness was counted from (grader.late.late_source)
    missing_from: str = ""  # the later batch of its assignment that lacked the student: row kept

    @property
    def final_score(self) -> float:
        """The score after the late penalty (``score`` is the raw score)."""
        return max(0.0, self.score - self.late_penalty)

    @property
    def late(self) -> bool:
        """Late by nbgrader's timestamp and the deadline, or by the LMS's own marker."""
        return self.seconds_late > 0 or self.lms.get("late") == "yes"

    @property
    def lateness(self) -> str:
        """"submitted 1.5 h after the deadline", from ``seconds_late``; empty when on time."""
        if self.seconds_late <= 0:
            return ""
        return f"submitted {self.seconds_late / 3600:.1f} h after the deadline"

    @property
    def kept_note(self) -> str:
        """``ann/10.1-... (not in later.zip of ...)`` for a row kept from an earlier batch that
        lacked its student (``missing_from``), as every command that lists them says it."""
        if not self.missing_from:
            return ""
        return f"{self.student_id}/{self.assignment} (not in {self.missing_from})"

    @property
    def key(self) -> tuple[str, str]:
        return self.student_id, self.assignment

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        if "submitted" not in data:  # a file written before the field said so in its reason only
            data = {**data, "submitted": not data.get("reason", "").startswith(NO_SUBMISSION)}
        return cls(**data)

    def sound(self) -> bool:
        """Whether the result adds up (a damaged or hand-edited file does not: regraded)."""
        return (self.status in (OK, ERROR, FLAGGED) and bool(self.content_hash)
                and abs(self.score - sum(self.points.values())) < 1e-9
                and abs(self.max_score - sum(self.max_points.values())) < 1e-9
                and set(self.points) <= set(self.max_points))


#: A test cell's grade id: ``check_<exercise>``, or ``predict_<name>`` for a prediction (as
#: ``course.progress.GRADE_ID_PREFIXES``, which ships to learners without grader/; a test holds them equal).
GRADE_ID_PREFIXES = ("check_", "predict_")


def exercise_name(grade_id: str) -> str:
    """``check_softmax`` -> ``softmax``, ``predict_qk_variance`` -> ``qk_variance``: the exercise a
    grade cell checks (a points column)."""
    for prefix in GRADE_ID_PREFIXES:
        if grade_id.startswith(prefix):
            return grade_id[len(prefix):]
    return grade_id


# ---------------------------------------------------------------- status


#: Notes that say the kernel did not run the whole notebook: the row is an error (the
#: learner's, not retried), whatever the points.
INCOMPLETE = ("kernel died", "kernel ignored", "not run", "stopped answering")


def settle(result: Result, problem: str = "") -> Result:
    """Decide ``result``'s status, retry and reason from what was gathered; the only place.

    * ``failures`` (the grader's own: nbgrader or a hidden check crashed, a worker died):
      ``error``, graded again on the next run (``retry``), never a learner's zero;
    * ``problem`` (the submission cannot be graded: missing, empty, invalid) or a
      notebook the kernel could not finish: ``error``, kept;
    * ``flags`` (integrity): ``flagged``, whatever else;
    * otherwise ``ok``.

    The reason is the problem, else every flag, failure and note once, in that order.
    """
    if problem:
        result.notes = [problem, *(n for n in result.notes if n != problem)]
    incomplete = any(what in n for n in result.notes for what in INCOMPLETE)
    result.retry = bool(result.failures)
    result.status = ERROR if result.failures or problem or incomplete else OK
    if result.flags:
        result.status = FLAGGED
    reasons = result.flags + result.failures + [n for n in result.notes if n not in result.flags]
    result.reason = problem or "; ".join(dict.fromkeys(reasons))
    return result


def grader_failure(student: str, assignment: str, content_hash: str, failure: str) -> Result:
    """The row of a submission the grader failed to grade (retried on the next run)."""
    return settle(Result(student, assignment, failures=[failure], content_hash=content_hash))


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


def run_keys(manifest: dict) -> list[tuple[str, str]]:
    """The rows of a run (its ``manifest.json``): its batch's, then those it kept from earlier
    runs into the same OUT (students a later batch or a regrade's zip did not hold:
    ``grader.autograde.host.run.carry_over``)."""
    keys = [tuple(key) for key in manifest["keys"]]
    return keys + [k for k in map(tuple, manifest.get("kept", [])) if k not in set(keys)]


# ---------------------------------------------------------------- grades.csv


def csv_rows(results: list[Result], exercises: list[str], header: bool = False) -> str:
    """Rows of grades.csv for ``results`` in the order given (the header first, if asked)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(HEAD + exercises + TAIL)
    for r in results:
        writer.writerow(
            [r.student_id, r.assignment, number(r.final_score), number(r.score),
             number(r.late_penalty), number(r.max_score)]
            + [number(r.points[e]) if e in r.points else "" for e in exercises]
            + [r.status, short(r.reason), r.submitted_at, number(round(r.seconds_late)),
               "yes" if r.late else "no", r.device, r.torch, "yes" if r.submitted else "no",
               r.late_source, "no" if r.missing_from else "yes"])
    return buffer.getvalue()


def csv_text(results: list[Result], exercises: list[str]) -> str:
    """grades.csv: one row per student and assignment, sorted; exercises in course order."""
    return csv_rows(sorted(results, key=lambda r: r.key), exercises, header=True)


def write_grades(out: Path, results: list[Result], exercises: list[str]) -> Path:
    path = out / "grades.csv"
    atomic_write(path, csv_text(results, exercises))
    return path
