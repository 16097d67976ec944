"""One mistake costs one exercise: every planted bug of a piece (``softmax``, ``causal_mask`` ...) left
in the notebook leaves the exercises built on it (``Exercise.builds_on``) passing in grading, and on
the visible side too where that side stands in for the piece (PyTorch's own softmax and causal mask;
the other stand-ins would be answers, so only grading holds them); only the piece's own check cell
loses points (:mod:`course.checking.pieces`)."""

from __future__ import annotations

import importlib
from functools import cache

import pytest

from course import progress
from course.checking import NotAttempted, call_learner
from grader.checks.exercise import gather_exercises
from samples import load_solution_namespace, run_visible_test
from tests.answers import assignment_of, declared, declared_sections


@cache
def namespace(section: str) -> dict:
    return load_solution_namespace(assignment_of(section))


def cascades() -> list:
    """(section, piece, exercise built on it, the piece's planted bug), for every bug of every piece."""
    found = []
    for section in declared_sections():
        own = set(progress.exercises(section))
        exercises = gather_exercises(f"grader.checks.s{section.replace('.', '_')}")
        bugs = [e for e in declared(section, namespace(section)) if not e.correct]
        for name, exercise in exercises.items():
            visible = next(k for k in type(exercise).__mro__ if k.__module__.startswith("course.visible"))
            for piece in exercise.builds_on:
                assert piece in own, f"{name} builds on {piece}, not an exercise of {section}"
                found += [pytest.param(section, piece, name, e.impl, piece in visible.builds_on,
                                       id=f"{name}, {piece}: {e.label}")
                          for e in bugs if e.exercise == piece]
    return found


def test_every_piece_has_planted_bugs():
    pieces = {(p.values[1], p.values[2]) for p in cascades()}
    assert {("softmax", "scaled_dot_product_attention"), ("causal_mask", "Transformer"),
            ("padding_mask", "Transformer"), ("next_token_probs", "sample"),
            ("split_heads", "MultiHeadAttention"),
            ("sinusoidal_positional_encoding", "PositionalEncoding")} <= pieces
    on_both = {(p.values[1], p.values[2]) for p in cascades() if p.values[4]}
    assert {("softmax", "scaled_dot_product_attention"), ("causal_mask", "Transformer")} <= on_both


@pytest.mark.slow
@pytest.mark.parametrize(("section", "piece", "exercise", "wrong_piece", "on_both_sides"), cascades())
def test_a_wrong_piece_costs_only_its_own_exercise(section, piece, exercise, wrong_piece, on_both_sides):
    space = namespace(section)
    own = space[piece]
    space[piece] = wrong_piece
    try:
        impl = space[exercise]
        hidden = importlib.import_module(f"grader.checks.s{section.replace('.', '_')}")
        getattr(hidden, f"check_{exercise}")(impl)
        if on_both_sides:
            run_visible_test(assignment_of(section), exercise, impl)
    finally:
        space[piece] = own


def test_not_attempted_names_the_cell_that_raises():
    """A check whose exercise calls another learner cell that still raises names that cell."""
    space: dict = {}
    exec("def DecoderBlock():\n    raise NotImplementedError()\n\n"  # noqa: S102 - two notebook cells
         "def Transformer():\n    return DecoderBlock()\n", space)
    with pytest.raises(NotAttempted) as caught:
        call_learner("Transformer", "a case", space["Transformer"])
    assert "Transformer cannot be checked yet: it calls DecoderBlock, which is not written yet" \
        in str(caught.value)
    with pytest.raises(NotAttempted, match="^DecoderBlock is not written yet"):
        call_learner("DecoderBlock", "a case", space["DecoderBlock"])
