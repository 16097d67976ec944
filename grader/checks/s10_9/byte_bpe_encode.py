"""Hidden check of ``byte_bpe_encode``: the contract's encoder (each pre-token's bytes, the merges in
their learned order) on more texts and merges of the visible kinds, the course's French among them.

The encoder lives here, not in the shipped visible check (which holds snapshots of its tokens,
:data:`course.visible.s10_9.byte_bpe_encode.EXPECTED`, made by :func:`snapshot`)."""

from __future__ import annotations

from course.visible.s10_9 import byte_bpe_train as visible_train
from course.visible.s10_9.byte_bpe_encode import ENCODE_ACROSS, ByteBpeEncode, encode_case
from course.visible.s10_9.byte_bpe_train import CHARACTERS, RIGHT_TO_LEFT, texts_of
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_9.bpe_encode import case_merges
from grader.checks.s10_9.byte_bpe_train import CASES as TRAIN_CASES
from grader.checks.s10_9.byte_bpe_train import (
    ComputedSnapshots,
    merge_symbols,
    pieces,
    reference_train,
    symbols_of,
)

SWITCHES = {ENCODE_ACROSS: {"across": True}, CHARACTERS: {"characters": True},
            RIGHT_TO_LEFT: {"right_to_left": True}}


def reference_encode(text: str, merges, *, across=False, characters=False,
                     right_to_left=False) -> list[bytes]:
    """The contract's tokens of ``text``; each keyword switches on one known mistake."""
    tokens: list[bytes] = []
    for piece in pieces(text, across):
        symbols = symbols_of(piece, characters)
        for pair in merges:  # in the order they were learned
            symbols = merge_symbols(symbols, tuple(pair), right_to_left)
        tokens.extend(symbols)
    return tokens


_TRAINED: dict[str, list[tuple[bytes, bytes]]] = {}


def trained_merges(case) -> list[tuple[bytes, bytes]]:
    """The contract's merges of a byte_bpe_train case (computed once per process)."""
    if case.name not in _TRAINED:
        _TRAINED[case.name] = reference_train(texts_of(case), case.params["num_merges"])
    return _TRAINED[case.name]


HOOK = TRAIN_CASES[0]  # the CS336 example with 7 lows, 10 merges
FRENCH = TRAIN_CASES[-2]  # 300 French sentences, 40 merges
CASES = [
    encode_case("widest slowest, with a space in front, with 10 merges of the CS336 example",
                "merges learned on a small corpus",
                " widest slowest", trained=HOOK),
    encode_case("abcd with (c, d), (b, c), (a, b), (b, cd)", "merge order matters", "abcd",
                merges=[(b"c", b"d"), (b"b", b"c"), (b"a", b"b"), (b"b", b"cd")]),
    encode_case("aaaaaa with (a, a), (aa, a), (aa, aa)", "repeated pairs", "aaaaaa",
                merges=[(b"a", b"a"), (b"aa", b"a"), (b"aa", b"aa")]),
    encode_case("ab ab! with (b'b', b' '), (b'b', b'!')", "pre-token boundaries", "ab ab!",
                merges=[(b"b", b" "), (b"b", b"!"), (b"a", b"b")]),
    encode_case("ß 🙃 東京 quiz with the merges of the CS336 example", "characters never trained on",
                "ß 🙃 東京 quiz", trained=HOOK),
    encode_case("Ærø with no merges", "no merges", "Ærø"),
    encode_case("runs of two spaces with no merges", "no merges", "  two  spaces "),
    encode_case("a French sentence with 40 merges of the course's French", "merges of the course's corpus",
                "nous mangeons les fraises, vous prenez le thé.", trained=FRENCH),
    encode_case("a sentence with é, ß and 🙂 with the same merges", "merges of the course's corpus",
                "le zèbre mange une crêpe à Straße 🙂", trained=FRENCH),
]


@registered
class GradedByteBpeEncode(ComputedSnapshots, ByteBpeEncode, GradedExercise):
    switches = SWITCHES

    def cases(self):
        return CASES

    def merges_of(self, case):
        return case_merges(case, visible_train.EXPECTED, trained_merges)

    def compute(self, case, **switch):
        return reference_encode(case.params["text"], self.merges_of(case), **switch)


def snapshot() -> dict:
    """What the visible check ships instead of this module's code."""
    return GradedByteBpeEncode().snapshots()
