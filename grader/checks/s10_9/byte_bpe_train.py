"""Hidden check of ``byte_bpe_train``: the contract's trainer (the pairs of bytes counted again every
round, inside pre-tokens) on more texts of the visible kinds, the course's French among them.

The trainer, written from the contract (it agrees merge for merge with Stanford CS336's
``train_bpe`` without special tokens: pairs inside GPT-2's pre-tokens, ties to the greatest pair of
bytes), lives here, not in the shipped visible check (which holds snapshots of its merges,
:data:`course.visible.s10_9.byte_bpe_train.EXPECTED`, made by :func:`snapshot`)."""

from __future__ import annotations

from collections import Counter

from course.visible.s10_9.byte_bpe_train import (
    ACROSS,
    CHARACTERS,
    FIRST_TIE,
    RIGHT_TO_LEFT,
    ByteBpeTrain,
    pretokenize,
    record,
    texts_of,
    train_case,
)
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_9.bpe_train import merge_symbols as merge_words

SWITCHES = {  # each known mistake, as the switches of reference_train that reproduce it
    ACROSS: {"across": True},  # each text one sequence of bytes
    CHARACTERS: {"characters": True},  # each character one symbol
    FIRST_TIE: {"ties": "first"},  # the first of the most frequent pairs counted
    RIGHT_TO_LEFT: {"right_to_left": True},  # a a a -> a aa
}


def symbols_of(piece: str, characters: bool = False) -> tuple[bytes, ...]:
    """A pre-token's first symbols: its UTF-8 bytes, one each (``characters``: the known mistake)."""
    if characters:
        return tuple(c.encode("utf-8") for c in piece)
    return tuple(bytes([b]) for b in piece.encode("utf-8"))


def pieces(text: str, across: bool = False) -> list[str]:
    """The pre-tokens of ``text`` (``across``: the known mistake, the whole text as one)."""
    return [text] if across else pretokenize(text)


def merge_symbols(symbols: tuple[bytes, ...], pair: tuple[bytes, bytes],
                  right_to_left: bool = False) -> tuple[bytes, ...]:
    """``symbols`` with every occurrence of ``pair`` joined, left to right, without overlap
    (``right_to_left``: the known mistake, from the right)."""
    if right_to_left:
        mirrored = merge_symbols(tuple(s[::-1] for s in symbols[::-1]), (pair[1][::-1], pair[0][::-1]))
        return tuple(s[::-1] for s in mirrored[::-1])
    return merge_words(symbols, pair)  # 10.9's merge: symbols of any kind that join with +


def reference_train(texts, num_merges: int, *, across=False, characters=False, ties="greatest",
                    right_to_left=False) -> list[tuple[bytes, bytes]]:
    """The contract's merges; each keyword switches on one known mistake."""
    counted = Counter(p for text in texts for p in pieces(text, across))  # in order of first appearance
    words = {symbols_of(p, characters): n for p, n in counted.items()}
    merges: list[tuple[bytes, bytes]] = []
    for _ in range(num_merges):
        counts: Counter = Counter()
        for symbols, n in words.items():
            for pair in zip(symbols, symbols[1:]):
                counts[pair] += n
        if not counts:
            break
        if ties == "greatest":
            best = max(counts.items(), key=lambda item: (item[1], item[0]))[0]
        else:  # the first of the most frequent, in the order they were counted
            best = max(counts, key=counts.__getitem__)
        merges.append(best)
        words = {merge_symbols(w, best, right_to_left): n for w, n in words.items()}
    return merges


CASES = [
    train_case("the CS336 example with 2 more lows, 10 merges", "worked by hand", 10,
               texts=("low low low low low low low lower lower widest widest widest newest newest newest "
                      "newest newest newest",)),
    train_case("xy and yx as two texts: four pairs of count 1", "ties", 4, texts=("xy", "yx")),
    train_case("ba ab, and ab: ties at every round", "ties", 5, texts=("ba ab", "ab")),
    train_case("c d c d c d c as one text, and dc: (b'c', b' ') would win across pre-tokens",
               "pre-token boundaries", 3, texts=("c d c d c d c", "dc")),
    train_case("contractions (it is, do not) are pre-tokens of their own", "pre-token boundaries", 4,
               texts=("it's it's", "don't don't stop")),
    train_case("aaaa twice, bcd 3 times", "overlapping pairs", 5, texts=("aaaa aaaa", "bcd bcd bcd")),
    train_case("aaaaa 3 times, ab 5 times", "overlapping pairs", 4,
               texts=("aaaaa aaaaa aaaaa", "ab ab ab ab ab")),
    train_case("Ærøskøbing, Øresund, naïve, 東京, 🙂🙃", "characters of several bytes", 12,
               texts=("Ærøskøbing Øresund", "naïve naïve 東京 東京", "🙂🙃 🙂")),
    train_case("a and b, 4 merges asked: none is possible", "fewer pairs than num_merges", 4,
               texts=("a", "b")),
    train_case("60 seeded random texts of x, y, ß, 🙂 and spaces, 20 merges", "random texts", 20, seed=11,
               random=(60, "xyß🙂 ", 7)),
    train_case("the first 300 French training sentences, 40 merges", "the course's corpus", 40,
               corpus=("fr", "train", 300)),
    train_case("150 English validation sentences, 25 merges", "the course's corpus", 25,
               corpus=("en", "valid", 150)),
]


class ComputedSnapshots:
    """Grading's side of a byte-level exercise (put first among the bases): its reference and each
    known mistake computed by :meth:`compute` (with a mistake's ``switches``), and :meth:`snapshots`,
    what the visible check ships instead (its ``EXPECTED``)."""

    switches: dict = {}

    def compute(self, case, **switch):
        raise NotImplementedError

    def reference(self, case, device):
        return {self.output: record(self.compute(case))}

    @property
    def mistakes(self):
        return {m: (lambda case, device, s=s: {self.output: record(self.compute(case, **s))})
                for m, s in self.switches.items()}

    def snapshots(self) -> dict:
        """The visible cases' outputs, and each known mistake's where they differ."""
        out = {}
        for case in self.visible_cases:
            right = self.compute(case)
            entry = {"reference": right}
            for mistake, switch in self.switches.items():
                wrong = self.compute(case, **switch)
                if wrong != right:
                    entry[mistake.name] = wrong
            out[case.name] = entry
        return out


@registered
class GradedByteBpeTrain(ComputedSnapshots, ByteBpeTrain, GradedExercise):
    switches = SWITCHES

    def cases(self):
        return CASES

    def compute(self, case, **switch):
        return reference_train(texts_of(case), case.params["num_merges"], **switch)


def snapshot() -> dict:
    """What the visible check ships instead of this module's code."""
    return GradedByteBpeTrain().snapshots()
