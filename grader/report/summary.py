"""The counts of a class report, from the results alone, and its CSV.

Everything here is a function of the results' grades and outcomes, never of when or where
they were graded: shards merged give the same summary, and the same CSV bytes, as one run.
Grading times are kept apart (:class:`Timing`), since they differ from run to run.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter
from dataclasses import dataclass, field

from grader.paths import section_order
from grader.results import ERROR, FLAGGED, OK, Result, number

#: How one graded submission did on one exercise, in the report's order.
FULL, PARTIAL, ZERO, NOT_ATTEMPTED = "full marks", "partial", "zero", "not attempted"
SHARES = (FULL, PARTIAL, ZERO, NOT_ATTEMPTED)
#: Failed with no mistake the checks recognise (or a section that names none yet).
UNNAMED = "no mistake named"
#: Short of full marks without its check having failed: the test cell never ran to its end
#: (a syntax error, an exception or a dead kernel before it; an error row).
DID_NOT_RUN = "did not run"


@dataclass
class MistakeCount:
    """One named mistake of one exercise and the submissions that made it."""

    name: str
    description: str
    students: list[str]


@dataclass
class ExerciseSummary:
    name: str
    max_points: float
    shares: dict[str, list[str]]  # FULL, PARTIAL, ZERO, NOT_ATTEMPTED -> students
    mistakes: list[MistakeCount]  # most frequent first
    unnamed: list[str]  # failed, no mistake named
    did_not_run: list[str] = field(default_factory=list)  # short of full marks, check never failed

    @property
    def short_of_full(self) -> int:
        """Partial plus zero: as many as the named mistakes, unnamed and did-not-run rows."""
        return len(self.shares[PARTIAL]) + len(self.shares[ZERO])

    @property
    def graded(self) -> int:
        return sum(len(s) for s in self.shares.values())


@dataclass
class AssignmentSummary:
    name: str
    students: int = 0  # rows: every student of the batch
    submitted: int = 0
    graded: int = 0  # rows nbgrader graded (they have points)
    status: dict[str, list[str]] = field(default_factory=dict)  # ok, flagged, error, late -> students
    max_score: float = 0.0
    scores: list[float] = field(default_factory=list)  # of the graded rows, after late penalties
    penalised: list[str] = field(default_factory=list)  # rows with a late penalty
    exercises: list[ExerciseSummary] = field(default_factory=list)


def share_of(points: float, max_points: float, outcome: str) -> str:
    if points >= max_points:
        return FULL
    if points > 0:
        return PARTIAL
    return NOT_ATTEMPTED if outcome == "not attempted" else ZERO


def exercise_summary(name: str, rows: list[Result]) -> ExerciseSummary:
    """How the graded ``rows`` (each has ``name`` among its exercises) did on it."""
    shares: dict[str, list[str]] = {s: [] for s in SHARES}
    made: dict[str, list[str]] = {}
    descriptions: dict[str, Counter] = {}
    unnamed, did_not_run = [], []
    for r in rows:
        outcome = r.outcomes.get(name, "")
        share = share_of(r.points.get(name, 0.0), r.max_points[name], outcome)
        shares[share].append(r.student_id)
        mistake = r.mistakes.get(name)
        if share in (FULL, NOT_ATTEMPTED):
            continue
        if outcome == "failed" and mistake:
            made.setdefault(mistake["name"], []).append(r.student_id)
            descriptions.setdefault(mistake["name"], Counter())[mistake["description"]] += 1
        elif outcome == "failed":
            unnamed.append(r.student_id)
        else:
            did_not_run.append(r.student_id)
    mistakes = [MistakeCount(m, min(descriptions[m], key=lambda d: (-descriptions[m][d], d)), sorted(s))
                for m, s in made.items()]
    mistakes.sort(key=lambda m: (-len(m.students), m.name))
    return ExerciseSummary(name, max(r.max_points[name] for r in rows),
                           {s: sorted(v) for s, v in shares.items()}, mistakes, sorted(unnamed),
                           sorted(did_not_run))


def summarize(results: list[Result], exercises: list[str] | None = None) -> list[AssignmentSummary]:
    """One summary per assignment (in course order); exercises in the order of
    ``exercises`` (grades.csv's columns), then any others in the order found."""
    by_assignment: dict[str, list[Result]] = {}
    for r in sorted(results, key=lambda r: r.key):
        by_assignment.setdefault(r.assignment, []).append(r)
    summaries = []
    for name in sorted(by_assignment, key=lambda a: (section_order(a), a)):
        rows = by_assignment[name]
        graded = [r for r in rows if r.max_points]
        found = list(dict.fromkeys(e for r in graded for e in r.max_points))
        order = [e for e in exercises or [] if e in found] + [e for e in found if e not in (exercises or [])]
        summaries.append(AssignmentSummary(
            name, students=len(rows),
            submitted=sum(r.submitted for r in rows), graded=len(graded),
            status={OK: [r.student_id for r in rows if r.status == OK],
                    FLAGGED: [r.student_id for r in rows if r.status == FLAGGED],
                    ERROR: [r.student_id for r in rows if r.status == ERROR],
                    "late": [r.student_id for r in rows if r.late]},
            max_score=max((r.max_score for r in graded), default=0.0),
            scores=[r.final_score for r in graded],
            penalised=[r.student_id for r in rows if r.late_penalty > 0],
            exercises=[exercise_summary(e, [r for r in graded if e in r.max_points]) for e in order]))
    return summaries


def to_review(results: list[Result]) -> list[Result]:
    """The rows to look at by hand: flagged first, then errors (the grader's own failures,
    which a rerun retries, before the submissions'), each by student."""
    rank = {FLAGGED: 0, ERROR: 1}
    return sorted((r for r in results if r.status in rank),
                  key=lambda r: (rank[r.status], r.status == ERROR and not r.retry, r.key))


# ---------------------------------------------------------------- timing


@dataclass
class Timing:
    """Grading seconds per notebook of one assignment (rows the workers graded)."""

    assignment: str
    seconds: list[float]

    def quantile(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else 0.0


def timings(results: list[Result]) -> list[Timing]:
    found: dict[str, list[float]] = {}
    for r in sorted(results, key=lambda r: r.key):
        if r.elapsed_s > 0:
            found.setdefault(r.assignment, []).append(r.elapsed_s)
    return [Timing(a, found[a]) for a in sorted(found, key=lambda a: (section_order(a), a))]


# ---------------------------------------------------------------- CSV

COLUMNS = ["assignment", "exercise", "measure", "name", "description", "count", "share", "students"]


def csv_text(summaries: list[AssignmentSummary]) -> str:
    """report.csv: one row per count, long format (filter it by assignment, exercise, measure).

    Per assignment: students, submitted, graded, ok, flagged, error, late, and one ``score``
    row per score reached. Per exercise: the four shares, one ``mistake`` row per named
    mistake (most frequent first) and the failures with no mistake named. ``share`` is of
    the graded rows; ``students`` lists the ids, space-separated.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)

    def row(a, exercise, measure, count, of, name="", description="", students=()):
        share = f"{count / of:.3f}" if of else ""
        writer.writerow([a, exercise, measure, name, description, count, share, " ".join(students)])

    for s in summaries:
        row(s.name, "", "students", s.students, 0)
        row(s.name, "", "submitted", s.submitted, s.students)
        row(s.name, "", "graded", s.graded, s.students)
        for status, students in s.status.items():
            row(s.name, "", status, len(students), s.students, students=students)
        row(s.name, "", "late penalty", len(s.penalised), s.students, students=s.penalised)
        for score, count in sorted(Counter(s.scores).items()):
            row(s.name, "", "score", count, s.graded, name=number(score))
        for e in s.exercises:
            for share, students in e.shares.items():
                row(s.name, e.name, share, len(students), e.graded, students=students)
            for m in e.mistakes:
                row(s.name, e.name, "mistake", len(m.students), e.graded, m.name, m.description, m.students)
            if e.unnamed:
                row(s.name, e.name, UNNAMED, len(e.unnamed), e.graded, students=e.unnamed)
            if e.did_not_run:
                row(s.name, e.name, DID_NOT_RUN, len(e.did_not_run), e.graded, students=e.did_not_run)
    return buffer.getvalue()
