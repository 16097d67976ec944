"""Hidden check of ``bpe_train``: the contract's trainer (the pairs counted again every round) on more
corpora of the visible kinds, the course's French and English among them.

The trainer lives here, not in the shipped visible check (which holds snapshots of its merges,
:data:`course.visible.s10_9.bpe_train.EXPECTED`, made by :func:`snapshot`): nothing a learner holds
computes the answer."""

from __future__ import annotations

from collections import Counter

from course.visible.s10_9.bpe_train import (
    EOW,
    EOW_GLUED,
    NO_EOW,
    NO_FREQUENCIES,
    OVERLAP,
    STALE_COUNTS,
    TIES,
    BpeTrain,
    as_tensor,
    repeat,
    train_case,
    words_of,
)
from grader.checks.exercise import GradedExercise, registered

SWITCHES = {  # each known mistake, as the switches of reference_train that reproduce it
    NO_EOW: {"eow": False},  # words as their characters alone
    EOW_GLUED: {"eow": "glued"},  # l o w</w>: the marker glued to the last character
    NO_FREQUENCIES: {"frequencies": False},  # each distinct word once
    OVERLAP: {"overlap": True},  # a a a holds ('a', 'a') once
    STALE_COUNTS: {"stale": True},  # the first round's counts for every round
    TIES: {"ties": "least"},  # the least of the most frequent pairs
}


def pair_counts(symbols: dict[tuple[str, ...], int], overlap: bool = False) -> Counter:
    """How often each adjacent pair occurs, each word's pairs times its count. ``overlap``: the known
    mistake, a pair that overlaps the same pair just before it is not counted."""
    counts: Counter = Counter()
    for word, n in symbols.items():
        last: dict[tuple[str, str], int] = {}
        for i, pair in enumerate(zip(word, word[1:])):
            if overlap and last.get(pair) == i - 1:
                continue
            last[pair] = i
            counts[pair] += n
    return counts


def merge_symbols(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """``word`` with every occurrence of ``pair`` joined into one symbol, left to right."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def reference_train(words, num_merges: int, *, eow=True, frequencies=True, overlap=False, stale=False,
                    ties="greatest") -> list[list[str]]:
    """The contract's merges; each keyword switches on one known mistake."""
    counted = Counter(words) if frequencies else Counter(set(words))
    symbols = {(*w[:-1], w[-1] + EOW) if eow == "glued" else tuple(w) + ((EOW,) if eow else ()): n
               for w, n in counted.items()}
    first = pair_counts(symbols, overlap)
    merges: list[tuple[str, str]] = []
    for _ in range(num_merges):
        counts = Counter({p: n for p, n in first.items() if p not in merges}) if stale else \
            pair_counts(symbols, overlap)
        if not counts:
            break
        if ties == "greatest":
            best = max(counts, key=lambda p: (counts[p], p))
        else:
            best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        symbols = {merge_symbols(w, best): n for w, n in symbols.items()}
    return [list(p) for p in merges]


CASES = [
    train_case("xy and yx: four pairs of count 1, the greatest ('y', 'x') first", "ties", 4,
               words=("xy", "yx")),
    train_case("ab 2, ba 2, 5 merges: ties at every round", "ties", 5, words=repeat(("ab", 2), ("ba", 2))),
    train_case("dc 4 times, ba once", "word frequencies", 3, words=repeat(("ba", 1), ("dc", 4))),
    train_case("abcd 3 times, bc 2: ('b', 'c') is merged, then pairs with b or c alone are gone",
               "a pair that disappears", 5, words=repeat(("abcd", 3), ("bc", 2))),
    train_case("aaaa twice, bcd 3 times", "overlapping pairs", 5, words=repeat(("aaaa", 2), ("bcd", 3))),
    train_case("aaaaa 3 times, ab 5 times", "overlapping pairs", 4, words=repeat(("aaaaa", 3), ("ab", 5))),
    train_case("the low, lower, newest, widest corpus with 2 more lows, 14 merges", "worked by hand", 14,
               words=repeat(("low", 7), ("lower", 2), ("newest", 6), ("widest", 3))),
    train_case("a and b, 4 merges asked: 2 are possible", "fewer pairs than num_merges", 4, words=("a", "b")),
    train_case("80 seeded random words of a, b, c, d, 25 merges", "random corpus", 25, seed=11,
               random=(80, "abcd", 6)),
    train_case("40 seeded random words of x, y, 30 merges", "random corpus", 30, seed=12,
               random=(40, "xy", 7)),
    train_case("the first 500 French training sentences, 60 merges", "the course's corpus", 60,
               corpus=("fr", "train", 500)),
    train_case("300 English validation sentences, 40 merges", "the course's corpus", 40,
               corpus=("en", "valid", 300)),
]


def snapshot() -> dict:
    """The visible cases' merges, and each known mistake's where they differ: what the visible check
    ships instead of this module's code."""
    out = {}
    for case in BpeTrain.visible_cases:
        words, k = words_of(case), case.params["num_merges"]
        right = reference_train(words, k)
        entry = {"reference": right}
        for mistake, switch in SWITCHES.items():
            wrong = reference_train(words, k, **switch)
            if wrong != right:
                entry[mistake.name] = wrong
        out[case.name] = entry
    return out


def _with_mistake(switch: dict):
    def run(case, device):
        return {"merges": as_tensor(reference_train(words_of(case), case.params["num_merges"], **switch))}
    return run


@registered
class GradedBpeTrain(BpeTrain, GradedExercise):
    mistakes = {mistake: _with_mistake(switch) for mistake, switch in SWITCHES.items()}

    def cases(self):
        return CASES

    def reference(self, case, device):
        return {"merges": as_tensor(reference_train(words_of(case), case.params["num_merges"]))}
