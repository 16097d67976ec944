"""10.9's checks: the merges and tokens the visible checks ship are grading's, and the cases worked by
hand say what the contract gives."""

import pytest

from course.checking import CheckFailure
from course.visible.s10_9 import bpe_encode as visible_encode
from course.visible.s10_9 import bpe_train as visible_train
from grader.checks.s10_9 import bpe_encode, bpe_train


@pytest.mark.parametrize("hidden, visible", [(bpe_train, visible_train), (bpe_encode, visible_encode)],
                         ids=["bpe_train", "bpe_encode"])
def test_visible_snapshot_is_the_hidden_reference(hidden, visible):
    """Is EXPECTED what grading's trainer and encoder compute today? If not, regenerate it from
    grader.checks.s10_9.<exercise>.snapshot() into course/visible/s10_9/<exercise>.py."""
    assert hidden.snapshot() == visible.EXPECTED


def test_cases_worked_by_hand():
    """Do the references give what the case names say (ties, "aaa", a pair that disappears, order)?"""
    merges = {c.name: visible_train.EXPECTED[c.name]["reference"] for c in visible_train.CASES}
    first = [m[0] for m in merges.values() if m]
    assert first[:4] == [["t", "</w>"], ["b", "</w>"], ["c", "</w>"], ["a", "a"]]
    assert merges[visible_train.CASES[2].name][1] == ["b", "c</w>"]  # ('b', 'c') gone after ('c', '</w>')
    assert merges[visible_train.CASES[3].name][-1] == ["aa", "a"]  # aaa merged as aa a
    assert bpe_encode.reference_encode("abc", [("b", "c"), ("a", "b")]) == ["a", "bc", "</w>"]
    assert bpe_encode.reference_encode("abc", [("b", "c"), ("a", "b")], greedy=True) == ["ab", "c", "</w>"]
    assert bpe_encode.reference_encode("aaaaa", [("a", "a"), ("aa", "a")]) == ["aa", "aaa", "</w>"]


def test_every_mistake_differs_somewhere_visible():
    """Is every known mistake of both exercises seen (differs from the reference) on a visible case?"""
    for visible in (visible_train, visible_encode):
        seen = {kind for entry in visible.EXPECTED.values() for kind in entry} - {"reference"}
        assert seen == {m.name for m in visible.MISTAKES}, visible.__name__


def test_merges_changed_in_place_leave_grading_as_it_was():
    """Does an encoder that reverses the merges it is given in place leave the hidden check's own merges
    (computed once per process) as they were, so that a right answer graded after it still passes?"""
    from tests.answers.s10_9.bpe_encode import encoding, reverses_merges

    exercise = bpe_encode.GradedBpeEncode()
    exercise.run_cases(encoding)  # the expected tokens, computed once
    with pytest.raises(CheckFailure, match="changed the list of merges"):
        exercise.run_cases(reverses_merges)
    exercise.run_cases(encoding)
