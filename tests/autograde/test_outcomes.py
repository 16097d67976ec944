"""Outcome files read back into results (grader/autograde/worker/outcomes.py): the two sides
combined, and whatever a learner's kernel leaves there never crashes the worker."""

from __future__ import annotations

import json
import os

from course.checking import failure
from course.checking.mistakes import Mistake
from course.checking.records import GRADING_DIR_ENV, save_outcome
from course.visible.s10_1.qkv_projections import K_FROM_Q, SWAPPED
from grader.autograde.worker.outcomes import LIMIT, read_outcomes

EXERCISES = ["qkv_projections", "QKVProjection"]


def save(monkeypatch, folder, exercise, side, error):
    monkeypatch.setenv(GRADING_DIR_ENV, str(folder))
    save_outcome(exercise, side, error)


def failing(mistake: Mistake | None = None) -> failure.CheckFailure:
    return failure.CheckFailure("wrong", mistake)


def test_sides_combined(tmp_path, monkeypatch):
    save(monkeypatch, tmp_path, "qkv_projections", "visible", None)
    save(monkeypatch, tmp_path, "qkv_projections", "hidden", failing(K_FROM_Q))
    save(monkeypatch, tmp_path, "QKVProjection", "visible", failure.NotAttempted("QKVProjection"))
    assert read_outcomes(tmp_path, EXERCISES) == (
        {"qkv_projections": "failed", "QKVProjection": "not attempted"},
        {"qkv_projections": {"name": "k_from_q", "description": "K computed with W_q"}})


def test_hidden_mistake_preferred_else_visible(tmp_path, monkeypatch):
    save(monkeypatch, tmp_path, "qkv_projections", "visible", failing(SWAPPED))
    save(monkeypatch, tmp_path, "qkv_projections", "hidden", failing(K_FROM_Q))
    assert read_outcomes(tmp_path, EXERCISES)[1]["qkv_projections"]["name"] == "k_from_q"
    save(monkeypatch, tmp_path, "qkv_projections", "hidden", failing(None))
    assert read_outcomes(tmp_path, EXERCISES)[1]["qkv_projections"]["name"] == "swapped"
    save(monkeypatch, tmp_path, "qkv_projections", "visible", None)
    assert read_outcomes(tmp_path, EXERCISES) == ({"qkv_projections": "failed"}, {})


def test_nothing_saved_outside_grading(tmp_path, monkeypatch):
    monkeypatch.delenv(GRADING_DIR_ENV, raising=False)
    save_outcome("qkv_projections", "visible", None)
    assert read_outcomes(tmp_path, EXERCISES) == ({}, {})


def test_learner_written_files_are_ignored_not_fatal(tmp_path):
    def write(name: str, content) -> None:
        (tmp_path / f"{name}.outcome.json").write_bytes(
            content if isinstance(content, bytes) else json.dumps(content).encode())

    good = {"exercise": "qkv_projections", "side": "visible", "status": "failed",
            "mistake": {"name": "k_from_q", "description": "x" * 5000}, "message": ""}
    write("qkv_projections.visible", good)
    write("qkv_projections.hidden",
          {**good, "side": "hidden", "mistake": {"name": "../../etc", "description": 3}})
    write("QKVProjection.visible", b"\xff\xfe not json")
    write("QKVProjection.hidden", {**good, "exercise": "QKVProjection", "side": "hidden",
                                   "message": "y" * (LIMIT + 1)})
    write("softmax.visible", {**good, "exercise": "softmax"})  # not this assignment's
    statuses, mistakes = read_outcomes(tmp_path, EXERCISES + ["../qkv_projections"])
    assert statuses == {"qkv_projections": "failed"}
    assert mistakes["qkv_projections"]["name"] == "k_from_q"
    assert len(mistakes["qkv_projections"]["description"]) == 200
    for payload in ([1, 2], {"exercise": "qkv_projections", "side": "hidden", "status": "won"},
                    "[" * 60_000):
        write("qkv_projections.hidden", payload if not isinstance(payload, str) else payload.encode())
        assert read_outcomes(tmp_path, EXERCISES)[0] == {"qkv_projections": "failed"}
    (tmp_path / "QKVProjection.visible.outcome.json").unlink()
    os.mkfifo(tmp_path / "QKVProjection.visible.outcome.json")  # opening it must not block
    (tmp_path / "QKVProjection.hidden.outcome.json").unlink()  # a link to a good file: not followed
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({**good, "exercise": "QKVProjection", "side": "hidden"}))
    os.symlink(elsewhere, tmp_path / "QKVProjection.hidden.outcome.json")
    assert read_outcomes(tmp_path, EXERCISES)[0] == {"qkv_projections": "failed"}
