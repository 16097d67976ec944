"""Results and their status (grader/results.py), and the messages that carry them
across the pipe (grader/autograde/messages.py): no process, no kernel."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from grader.autograde.messages import (
    Failed,
    Graded,
    GradeJob,
    GradingOptions,
    Message,
    Ready,
    TemplateBuilt,
    TemplateJob,
    WorkerSettings,
)
from grader.autograde.sandbox.config import Limits, SandboxConfig
from grader.results import ERROR, FLAGGED, OK, Result, csv_rows, grader_failure, settle


def result(**fields) -> Result:
    return Result("s", "a", content_hash="h", **fields)


@pytest.mark.parametrize("fields, status, retry", [
    ({}, OK, False),
    ({"notes": ["needs manual grading: x (counted as 0)"]}, OK, False),
    ({"notes": ["cell 3: the kernel died while running this cell"]}, ERROR, False),
    ({"failures": ["the hidden check of x crashed"]}, ERROR, True),
    ({"flags": ["x: its record was saved under another name"]}, FLAGGED, False),
    ({"flags": ["f"], "failures": ["the grader failed"]}, FLAGGED, True),
])
def test_status_is_settled_from_what_was_gathered(fields, status, retry):
    """Is a row ok, an error (retried only when the grader failed) or flagged (whatever else),
    from its flags, failures and notes alone?"""
    settled = settle(result(**fields))
    assert (settled.status, settled.retry) == (status, retry)


def test_the_reason_lists_flags_then_failures_then_notes_once():
    """Does the reason say everything once, the flags first?"""
    settled = settle(result(flags=["f"], failures=["g"], notes=["n", "f", "n"]))
    assert settled.reason == "f; g; n"


def test_a_submission_that_cannot_be_graded_is_an_error_kept():
    """Is a problem (no submission, invalid notebook) an error that is not retried, with the
    problem as its reason and first note?"""
    settled = settle(result(notes=["x.ipynb is missing"]), problem="no submission")
    assert (settled.status, settled.retry, settled.reason) == (ERROR, False, "no submission")
    assert settled.notes == ["no submission", "x.ipynb is missing"]


def test_submitted_is_a_field_that_older_files_get_from_their_reason():
    """Does a result say whether there was a submission as a field (grades.csv's column), and
    does a file written before the field get it from its reason?"""
    missing = settle(result(submitted=False), problem="no submission (the student's folder is empty)")
    assert Result.from_json(missing.to_json()) == missing
    old = {k: v for k, v in dataclasses.asdict(missing).items() if k != "submitted"}
    assert Result.from_dict(old).submitted is False
    assert Result.from_dict({**old, "reason": "x.ipynb is missing"}).submitted is True
    rows = csv.DictReader(io.StringIO(csv_rows([missing, result()], [], header=True)))
    assert [r["submitted"] for r in rows] == ["no", "yes"]


def test_a_grader_failure_is_retried():
    failure = grader_failure("s", "a", "h", "grading stopped")
    assert (failure.status, failure.retry, failure.reason, failure.content_hash) == \
        (ERROR, True, "grading stopped", "h")


def test_a_result_round_trips_and_takes_new_fields_with_defaults():
    """Does a result come back equal from its JSON, and does a file written before a field
    was added still load (the field takes its default)?"""
    r = result(points={"x": 1.0}, max_points={"x": 2.0}, score=1.0, max_score=2.0,
               timings={"autograde": 1.5}, flags=["f"])
    assert Result.from_json(r.to_json()) == r
    old = {k: v for k, v in dataclasses.asdict(r).items() if k != "timings"}
    assert Result.from_dict(old).timings == {}


MESSAGES = [
    WorkerSettings("/w/jobs", "/w/outbox", "/w/jupyter",
                   SandboxConfig(Limits(cpu_seconds=5), readable=("/usr",), hidden=("/out",)),
                   GradingOptions(timeout=3), 2, "/w/mpl"),
    GradeJob("s", "a", "/subs/s/a", ("nb.ipynb", "timestamp.txt"), ("a note",), "/src", "/t.db", "h"),
    TemplateJob("a", "/src", "/dest", None),
    Ready(42), Graded(result(points={"x": 1.0}), "/w/outbox/s-1"), TemplateBuilt("/t.db"),
    Failed("KeyError: 'x'"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_as_one_line(message):
    """Does every message cross the pipe as one JSON line and come back equal, typed?"""
    line = message.to_json()
    assert "\n" not in line
    back = Message.from_json(line)
    assert type(back) is type(message) and back == message


def test_messages_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        MESSAGES[1].student = "other"
