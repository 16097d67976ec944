"""``byte_bpe_encode``: the exercise and its visible check: texts encoded with merges written by hand
(where their order matters, repeated pairs, pre-token boundaries) and with the merges
``byte_bpe_train`` learns, on characters the merges never saw; its known mistakes and the messages
both sides give.

This module ships no encoder: :data:`EXPECTED` holds, for each visible case, the contract's tokens and
what each known mistake returns where it differs, as grading's encoder computes them (a test holds the
two equal)."""

from __future__ import annotations

import copy

from course.checking import Case, CheckFailure, Mistake, passed, visible_check
from course.visible.s10_9 import byte_bpe_train
from course.visible.s10_9.byte_bpe_train import CHARACTERS, RIGHT_TO_LEFT, SnapshotExercise, record

NAME = "byte_bpe_encode"
RULE = ("Split the text with pretokenize; each pre-token starts as its UTF-8 bytes, one symbol per byte; "
        "apply the merges in the order they were learned, each to the whole pre-token (every occurrence, "
        "left to right) before the next; then the tokens of every pre-token, in order.")
ENCODE_ACROSS = Mistake("encode_across_pretokens",
                        "the text encoded as one sequence of bytes, not pre-token by pre-token",
                        "Split the text with pretokenize and encode each pre-token on its own: "
                        "training never saw a pair across two pre-tokens, so no token may hold one.")
#: The mistakes wrong tokens are compared with (the first that matches is named).
MISTAKES = (ENCODE_ACROSS, CHARACTERS, RIGHT_TO_LEFT)

CS336 = byte_bpe_train.CASES[0]
ENGLISH = byte_bpe_train.CASES[-1]


def encode_case(name: str, kind: str, text: str, merges=None, trained: Case | None = None) -> Case:
    """A case of ``byte_bpe_encode``: a text and its merges, given (``merges``, pairs of bytes) or the
    contract's merges of the byte_bpe_train case ``trained``. Kinds: "merges learned on a small
    corpus", "merge order matters", "repeated pairs", "pre-token boundaries", "characters never
    trained on", "no merges", "merges of the course's corpus"."""
    params = {"text": text, "merges": tuple(map(tuple, merges or ())), "trained": trained}
    return Case(name, 0, params, kind=kind)


CASES = [
    encode_case("lowest newer, with a space in front, with the merges of the CS336 example",
                "merges learned on a small corpus",
                " lowest newer", trained=CS336),
    encode_case("abc with (b'b', b'c') then (b'a', b'b'): a bc, since (b'a', b'b') is gone when its "
                "turn comes", "merge order matters", "abc", merges=[(b"b", b"c"), (b"a", b"b")]),
    encode_case("aaaaa with (b'a', b'a') then (b'aa', b'a'): aa aa a, then aa aaa", "repeated pairs",
                "aaaaa", merges=[(b"a", b"a"), (b"aa", b"a")]),
    encode_case("a a with (b'a', b' ') then (b' ', b'a'): the first lies across two pre-tokens and "
                "never applies", "pre-token boundaries", "a a", merges=[(b"a", b" "), (b" ", b"a")]),
    encode_case("zebra, café, straße 🙂 with the merges of the CS336 example: bytes never merged",
                "characters never trained on", "zebra, café, straße 🙂", trained=CS336),
    encode_case("été with no merges: five bytes", "no merges", "été"),
    encode_case("the empty text: no tokens", "no merges", ""),
    encode_case("an English sentence with 30 merges of the course's English", "merges of the course's corpus",
                "the black horse sees the cheeses.", trained=ENGLISH),
]


def expect_tokens(result, text: str, where: str) -> list[bytes]:
    """The tokens as a list of bytes that spell the text's UTF-8, or a failure that says what came back."""
    if not isinstance(result, (list, tuple)) or not all(isinstance(t, bytes) for t in result):
        holding = " holding other things" if isinstance(result, (list, tuple)) else ""
        raise CheckFailure(f"{NAME} should return a list of bytes objects (the text's tokens, such as "
                           f"b' the'), but returned a {type(result).__name__}{holding} in {where}.")
    if b"".join(result) != text.encode("utf-8"):
        raise CheckFailure(f"{NAME}'s tokens, joined, are {b''.join(result)!r} in {where}, where they "
                           f"should be the text's UTF-8 bytes, {text.encode('utf-8')!r}: every byte once, in "
                           "order "
                           "(a merge that overlaps the occurrence before it repeats a byte).")
    return list(result)


class ByteBpeEncode(SnapshotExercise):
    name = NAME
    reference_name = "the contract's tokens"
    visible_cases = CASES
    output, what, known, rule = "tokens", "token", MISTAKES, RULE

    def table(self):
        return EXPECTED

    def merges_of(self, case: Case) -> list[tuple[bytes, bytes]]:
        """The case's merges: given, or the contract's merges of its byte_bpe_train case."""
        trained = case.params["trained"]
        if trained is None:
            return [tuple(m) for m in case.params["merges"]]
        return list(byte_bpe_train.EXPECTED[trained.name]["reference"])

    def run(self, impl, case, device):
        text, merges = case.params["text"], self.merges_of(case)
        given = copy.deepcopy(merges)
        result = self.call(case, impl, text, merges)
        if merges != given:
            raise CheckFailure(f"{NAME} changed the list of merges it was given in {case}: read it, leave it "
                               "as it is.")
        return {"tokens": record(expect_tokens(result, text, str(case)))}


@visible_check
def check_byte_bpe_encode(byte_bpe_encode) -> None:
    """Merges where their order matters, repeated pairs, pre-token boundaries, characters never trained
    on, no merges, merges learned on small texts and on the course's English: the tokens, as bytes."""
    ByteBpeEncode().run_cases(byte_bpe_encode)
    passed("byte_bpe_encode starts every pre-token from its bytes and applies the merges in their learned "
           "order, left to right.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": tokens, mistake name: tokens where
#: that mistake returns others}}.
EXPECTED: dict[str, dict[str, list]] = {
    'lowest newer, with a space in front, with the merges of the CS336 example': {
        'reference': [
            b' ', b'low', b'est', b' ', b'ne', b'w', b'e', b'r',
        ],
    },
    "abc with (b'b', b'c') then (b'a', b'b'): a bc, since (b'a', b'b') is gone when its turn comes": {
        'reference': [
            b'a', b'bc',
        ],
    },
    "aaaaa with (b'a', b'a') then (b'aa', b'a'): aa aa a, then aa aaa": {
        'reference': [
            b'aa', b'aaa',
        ],
        'merge_right_to_left': [
            b'a', b'aa', b'aa',
        ],
    },
    "a a with (b'a', b' ') then (b' ', b'a'): the first lies across two pre-tokens and never applies": {
        'reference': [
            b'a', b' a',
        ],
        'encode_across_pretokens': [
            b'a ', b'a',
        ],
    },
    'zebra, café, straße 🙂 with the merges of the CS336 example: bytes never merged': {
        'reference': [
            b'z', b'e', b'b', b'r', b'a', b',', b' ', b'c', b'a', b'f', b'\xc3', b'\xa9', b',', b' ', b'st',
            b'r', b'a', b'\xc3', b'\x9f', b'e', b' ', b'\xf0', b'\x9f', b'\x99', b'\x82',
        ],
        'characters_as_symbols': [
            b'z', b'e', b'b', b'r', b'a', b',', b' ', b'c', b'a', b'f', b'\xc3\xa9', b',', b' ', b'st',
            b'r', b'a', b'\xc3\x9f', b'e', b' ', b'\xf0\x9f\x99\x82',
        ],
    },
    'été with no merges: five bytes': {
        'reference': [
            b'\xc3', b'\xa9', b't', b'\xc3', b'\xa9',
        ],
        'characters_as_symbols': [
            b'\xc3\xa9', b't', b'\xc3\xa9',
        ],
    },
    'the empty text: no tokens': {
        'reference': [],
    },
    "an English sentence with 30 merges of the course's English": {
        'reference': [
            b'the', b' black', b' h', b'o', b'rse', b' see', b's', b' the', b' c', b'he', b'e', b'se', b's',
            b'.',
        ],
    },
}
