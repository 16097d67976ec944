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


# ---------------------------------------------------------------- byte level


BYTE_MODULES = [("byte_bpe_train", "byte_bpe_train"), ("byte_bpe_encode", "byte_bpe_encode"),
                ("byte_bpe_decode", "byte_bpe_decode")]


@pytest.mark.parametrize("name", [name for name, _ in BYTE_MODULES])
def test_byte_snapshot_is_the_hidden_reference(name):
    """Is EXPECTED what grading's byte-level trainer, encoder and decoder compute today? If not,
    regenerate it from grader.checks.s10_9.<exercise>.snapshot() into course/visible/s10_9/<exercise>.py."""
    import importlib

    hidden = importlib.import_module(f"grader.checks.s10_9.{name}")
    visible = importlib.import_module(f"course.visible.s10_9.{name}")
    assert hidden.snapshot() == visible.EXPECTED
    seen = {kind for entry in visible.EXPECTED.values() for kind in entry} - {"reference"}
    assert seen == {m.name for m in visible.MISTAKES}, "a known mistake no visible case shows"


def test_byte_trainer_agrees_with_cs336_handout():
    """Does grading's trainer give the merges Stanford CS336's handout works by hand on its example (low 5,
    lower 2, widest 3, newest 6): s t, e st, o w, l ow, w est, n e? And break ties as CS336 does, to the
    greatest pair of bytes?"""
    from grader.checks.s10_9.byte_bpe_train import reference_train

    text = " ".join(["low"] * 5 + ["lower"] * 2 + ["widest"] * 3 + ["newest"] * 6)
    assert reference_train([text], 6) == [(b"s", b"t"), (b"e", b"st"), (b"o", b"w"), (b"l", b"ow"),
                                          (b"w", b"est"), (b"n", b"e")]
    # ("A", "B"), ("A", "C"), ("B", "ZZ") and ("BA", "A") tie: CS336's handout merges ("BA", "A")
    assert max([(b"A", b"B"), (b"A", b"C"), (b"B", b"ZZ"), (b"BA", b"A")]) == (b"BA", b"A")
    assert reference_train(["ab ba"], 1) == [(b"b", b"a")]
    assert reference_train(["ab ba"], 1, ties="first") == [(b"a", b"b")]
    assert reference_train(["a b a b a b"], 1) == [(b" ", b"b")]  # never (b"a", b" "): across pre-tokens


def test_byte_encoder_and_decoder_round_trip():
    """Do grading's encoder and decoder round-trip text the merges never saw, and does decoding token by
    token (the known mistake) break a character split across tokens?"""
    from grader.checks.s10_9.byte_bpe_decode import reference_decode
    from grader.checks.s10_9.byte_bpe_encode import reference_encode
    from grader.checks.s10_9.byte_bpe_train import reference_train

    merges = reference_train(["the zebra eats the crêpe", "the café"], 20)
    for text in ("zèbre 東京 🙂 Straße", "", "  spaces  ", "it's"):
        tokens = reference_encode(text, merges)
        assert b"".join(tokens) == text.encode("utf-8")
        assert reference_decode(tokens) == text
    assert reference_decode([b"caf\xc3", b"\xa9"]) == "café"
    assert reference_decode([b"caf\xc3", b"\xa9"], one_by_one=True) == "caf\ufffd\ufffd"
