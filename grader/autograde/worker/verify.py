"""The grader's half of keeping the grade honest: verify the records in a clean process.

Every hidden check saves the learner's outputs in a record
(:class:`grader.checks.integrity.Record`; the file is defined in :mod:`course.checking.records`).
This module recomputes the reference for every saved case in the grading worker, a process
that never ran learner code, and compares again; :func:`apply_integrity` then takes the
points of an exercise whose test cell passed but whose record is missing, failed or flagged.
The design and its limits are in :mod:`grader.checks.integrity`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from course.checking.records import RECORD_SUFFIX, load_record, record_name
from grader.checks import EXERCISES
from grader.checks.guarded_calls import Case, CheckFailure, grading_device
from grader.results import Result


@dataclass(frozen=True)
class Verdict:
    """The clean process's view of one exercise."""

    exercise: str
    passed: bool
    flags: tuple[str, ...]
    reason: str = ""


def verify_record(record: dict) -> Verdict:
    """Recompute the reference for a record's cases and compare with what was saved."""
    name = record["exercise"]
    flags = tuple(record["flags"])
    if not record["passed"]:
        return Verdict(name, False, flags, "the check failed in the notebook")
    exercise = EXERCISES[name]
    cases: dict[str, Case] = {c.name: c for c in exercise.cases()}
    if set(record["cases"]) != set(cases):
        return Verdict(name, False, flags + ("saved cases do not match the check's cases",))
    device = grading_device()
    try:
        for case_name, got in record["cases"].items():
            exercise.evaluate(cases[case_name], {k: v.to(device) for k, v in got.items()}, device)
    except CheckFailure as failure:
        reason = f"outputs do not match the reference in a clean process: {failure}"
        return Verdict(name, False, flags + (reason,), reason)
    return Verdict(name, True, flags)


def verify_records(folder: Path) -> dict[str, Verdict]:
    """Verdicts for every record in ``folder``, by exercise name."""
    verdicts = {}
    for path in sorted(folder.glob(f"*{RECORD_SUFFIX}")):
        verdict = verify_record(load_record(path))
        verdicts[verdict.exercise] = verdict
    return verdicts


def check_records(folder: Path) -> tuple[dict[str, dict], list[str]]:
    """Verdicts of every record, by exercise, as the clean process sees them; plus problems."""
    verdicts, problems = {}, []
    for path in sorted(folder.glob(f"*{RECORD_SUFFIX}")):
        try:
            record = load_record(path)
            verdict = verify_record(record)
        except Exception as error:  # noqa: BLE001 - a record is learner-writable data
            problems.append(f"record {path.name} is unreadable ({type(error).__name__}: "
                            f"{str(error)[:120]})")
            continue
        verdicts[verdict.exercise] = {"passed": verdict.passed, "flags": list(verdict.flags),
                                      "reason": verdict.reason, "device": record.get("device", ""),
                                      "torch": record.get("torch", ""),
                                      "file": path.name}
    return verdicts, problems


def apply_integrity(result: Result, exercises: list[str], verdicts: dict[str, dict]) -> None:
    """Zero exercises whose passing test cell is not backed by a clean, verified record."""
    for exercise, verdict in verdicts.items():
        for flag in verdict["flags"]:
            result.flags.append(f"{exercise}: {flag}")
        if verdict["file"] != record_name(exercise):
            result.flags.append(f"{exercise}: its record was saved under another name "
                                f"({verdict['file']})")
    for exercise in exercises:
        if exercise not in EXERCISES:
            continue  # not a hidden check of this course: nothing to verify
        points = result.points.get(exercise, 0)
        verdict = verdicts.get(exercise)
        problem = ""
        if points > 0 and verdict is None:
            problem = ("its test cell passed but the hidden check saved no record (the check "
                       "was replaced or skipped)")
        elif points > 0 and not verdict["passed"]:
            problem = "its test cell passed but " + (
                verdict["reason"] or "the check's record says it failed")
        if problem:
            result.flags.append(f"{exercise}: {problem}")
        if problem or (verdict is not None and verdict["flags"]):
            result.points[exercise] = 0.0
