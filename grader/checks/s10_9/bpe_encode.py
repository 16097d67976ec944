"""Hidden check of ``bpe_encode``: the contract's encoder (the merges in their learned order) on more
words and merges of the visible kinds, the course's French among them (conjugation endings).

The encoder lives here, not in the shipped visible check (which holds snapshots of its tokens,
:data:`course.visible.s10_9.bpe_encode.EXPECTED`, made by :func:`snapshot`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from course.visible.s10_9 import bpe_train as visible_train
from course.visible.s10_9.bpe_encode import FIRST_ONLY, GREEDY, NO_EOW, BpeEncode, encode_case
from course.visible.s10_9.bpe_train import EOW, as_tensor, words_of
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_9.bpe_train import CASES as TRAIN_CASES
from grader.checks.s10_9.bpe_train import merge_symbols, reference_train

SWITCHES = {NO_EOW: {"eow": False}, GREEDY: {"greedy": True}, FIRST_ONLY: {"first_only": True}}


def reference_encode(word: str, merges, *, eow=True, greedy=False, first_only=False) -> list[str]:
    """The contract's tokens of ``word``; each keyword switches on one known mistake."""
    symbols = tuple(word) + ((EOW,) if eow else ())
    if greedy:
        known = {a + b for a, b in merges} | set(symbols)
        text, out, i = "".join(symbols), [], 0
        while i < len(text):
            j = max((j for j in range(i + 1, len(text) + 1) if text[i:j] in known), default=None)
            if j is None:  # a piece of the marker alone: the marker is one symbol
                j = i + len(EOW) if text.startswith(EOW, i) else i + 1
            out.append(text[i:j])
            i = j
        return out
    for a, b in merges:
        if first_only:
            at = next((i for i in range(len(symbols) - 1) if symbols[i:i + 2] == (a, b)), None)
            if at is not None:
                symbols = symbols[:at] + (a + b,) + symbols[at + 2:]
        else:
            symbols = merge_symbols(symbols, (a, b))
    return list(symbols)


_TRAINED: dict[str, list[tuple[str, str]]] = {}


def trained_merges(case) -> list[tuple[str, str]]:
    """The contract's merges of a bpe_train case (computed once per process)."""
    if case.name not in _TRAINED:
        _TRAINED[case.name] = [tuple(m) for m in reference_train(words_of(case), case.params["num_merges"])]
    return _TRAINED[case.name]


def case_merges(case, expected: Mapping[str, dict], train: Callable) -> list[tuple]:
    """The merges an encoder case uses: its own, the trainer's snapshot in ``expected`` (the visible
    check's), or ``train``'s for the trainer's case; always a fresh list, as learner code may change
    what it is given."""
    trained = case.params["trained"]
    if trained is None:
        return [tuple(m) for m in case.params["merges"]]
    if trained.name in expected:
        return [tuple(m) for m in expected[trained.name]["reference"]]
    return list(train(trained))


FRENCH = TRAIN_CASES[-2]  # 500 French sentences, 60 merges
HOOK = TRAIN_CASES[6]  # low, lower, newest, widest with 7 lows, 14 merges
CASES = [
    encode_case("widest with 14 merges of low, lower, newest, widest", "merges learned on a small corpus",
                "widest", trained=HOOK),
    encode_case("slowest, never trained on, with the same merges", "merges learned on a small corpus",
                "slowest", trained=HOOK),
    encode_case("abcd with (c, d), (b, c), (a, b), (b, cd)", "merge order matters", "abcd",
                merges=[("c", "d"), ("b", "c"), ("a", "b"), ("b", "cd")]),
    encode_case("xyz with (y, z) then (x, y)", "merge order matters", "xyz", merges=[("y", "z"), ("x", "y")]),
    encode_case("aaaaaa with (a, a), (aa, a), (aa, aa)", "repeated pairs", "aaaaaa",
                merges=[("a", "a"), ("aa", "a"), ("aa", "aa")]),
    encode_case("abababa with (a, b), (ab, ab)", "repeated pairs", "abababa",
                merges=[("a", "b"), ("ab", "ab")]),
    encode_case("quiz with merges that know none of its letters", "characters never merged", "quiz",
                trained=HOOK),
    encode_case("a with no merges", "no merges", "a"),
    encode_case("y, a word of one letter, with the 14 merges of low, lower, newest, widest", "one letter",
                "y", trained=HOOK),
    encode_case("mangeons with 60 merges of the course's French", "merges of the course's corpus", "mangeons",
                trained=FRENCH),
    encode_case("regardez with the same merges", "merges of the course's corpus", "regardez", trained=FRENCH),
    encode_case("prenons with the same merges", "merges of the course's corpus", "prenons", trained=FRENCH),
]


def snapshot() -> dict:
    """The visible cases' tokens, and each known mistake's where they differ."""
    out = {}
    for case in BpeEncode.visible_cases:
        word, merges = case.params["word"], BpeEncode().merges_of(case)
        right = reference_encode(word, merges)
        entry = {"reference": right}
        for mistake, switch in SWITCHES.items():
            wrong = reference_encode(word, merges, **switch)
            if wrong != right:
                entry[mistake.name] = wrong
        out[case.name] = entry
    return out


@registered
class GradedBpeEncode(BpeEncode, GradedExercise):
    def cases(self):
        return CASES

    def merges_of(self, case):
        return case_merges(case, visible_train.EXPECTED, trained_merges)

    def reference(self, case, device):
        return {"tokens": as_tensor(reference_encode(case.params["word"], self.merges_of(case)))}

    @property
    def mistakes(self):
        return {m: (lambda case, device, s=s: {"tokens": as_tensor(
            reference_encode(case.params["word"], self.merges_of(case), **s))}) for m, s in SWITCHES.items()}
