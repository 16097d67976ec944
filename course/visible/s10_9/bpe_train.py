"""``bpe_train``: the exercise and its visible check, on corpora worked by hand (ties, a pair that
disappears after a merge, overlapping pairs in "aaa", word frequencies), seeded random corpora and the
first sentences of the course's corpus; its known mistakes and the messages both sides give.

This module ships no trainer: :data:`EXPECTED` holds, for each visible case, the contract's merges and
what each known mistake returns where it differs, as grading's trainer computes them (a test holds
the two equal). The helpers both exercises share (the end-of-word marker, corpora, outputs as
tensors) live here too.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Sequence

import torch

from course.checking import Case, CheckFailure, Exercise, Mistake, passed, visible_check

NAME = "bpe_train"
#: The end-of-word marker: a symbol of its own after every word's last character.
EOW = "</w>"
RULE = ("Each round, count every adjacent pair of symbols in every word (a word that occurs k times adds k), "
        "merge the most frequent pair everywhere, left to right, and record it; among pairs of the same "
        "count the greatest, as Python orders tuples of strings, wins.")
TIES = Mistake("ties", "ties between equally frequent pairs broken another way",
               "Among the pairs of the highest count, merge the greatest one in Python's order of "
               "tuples of strings (the first symbols compared first, then the second): the last of them "
               "once sorted.")
STALE_COUNTS = Mistake("stale_counts", "pair counts counted once and not updated after each merge",
                       "A merge changes the words' symbols: pairs that held a merged symbol disappear and "
                       "new pairs appear. Count again (or update the counts) before each round's choice.")
OVERLAP = Mistake("overlap", "overlapping pairs counted once: the symbols a a a hold the pair ('a', 'a') "
                  "twice",
                  "Count the pair at every position where two neighbouring symbols form it, even where it "
                  "overlaps the one before; only the merge itself goes left to right without overlap.")
NO_EOW = Mistake("no_end_of_word", f"words split into characters without the end-of-word marker {EOW!r}",
                 f"Every word starts as its characters followed by {EOW!r}, a symbol of its own that merges "
                 "like any other (that is how a suffix differs from the same letters inside a word).")
EOW_GLUED = Mistake("end_of_word_glued", f"the end-of-word marker glued to the last character (l o w{EOW}, "
                    "as subword-nmt's learn_bpe has it) instead of a symbol of its own",
                    f"A word is its characters followed by {EOW!r} as one more symbol: l o w {EOW}, so that "
                    f"('w', {EOW!r}) is a pair like any other.")
NO_FREQUENCIES = Mistake("word_frequencies", "each distinct word counted once, whatever its frequency",
                         "words is the training text: a word that occurs k times in it adds k to the count "
                         "of each of its pairs.")
#: The mistakes a wrong list of merges is compared with (the first that matches is named).
MISTAKES = (NO_EOW, EOW_GLUED, NO_FREQUENCIES, OVERLAP, STALE_COUNTS, TIES)


# ---------------------------------------------------------------- corpora


def course_words(side: str, split: str, sentences: int) -> list[str]:
    """The words of the first ``sentences`` sentences of one split of the course's corpus, in order
    (``side`` "en" or "fr")."""
    from course.translation import load_pairs

    pairs = load_pairs(split=split)[:sentences]
    return [w for fr, en in pairs for w in (en if side == "en" else fr).split()]


def random_words(seed: int, count: int, alphabet: str, longest: int) -> list[str]:
    """``count`` seeded words of 1 to ``longest`` letters of ``alphabet`` (repeats likely)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))) for _ in range(count)]


def words_of(case: Case) -> list[str]:
    """A case's training words: given, seeded random, or from the course's corpus."""
    p = case.params
    if "words" in p:
        return list(p["words"])
    if "random" in p:
        return random_words(case.seed, *p["random"])
    return course_words(*p["corpus"])


def train_case(name: str, kind: str, num_merges: int, seed: int = 0, **corpus) -> Case:
    """A case of ``bpe_train``: its corpus (``words``, ``random`` = (count, alphabet, longest) or
    ``corpus`` = (side, split, sentences)) and ``num_merges``. Kinds: "worked by hand", "ties",
    "a pair that disappears", "overlapping pairs", "word frequencies", "fewer pairs than num_merges",
    "random corpus", "the course's corpus"."""
    return Case(name, seed, {"num_merges": num_merges, **corpus}, kind=kind)


def repeat(*counted: tuple[str, int]) -> tuple[str, ...]:
    """("low", 5), ("lower", 2) -> a text of 5 lows and 2 lowers, interleaved (order must not matter)."""
    left = dict(counted)
    out = []
    while any(left.values()):
        for word in left:
            if left[word]:
                out.append(word)
                left[word] -= 1
    return tuple(out)


CASES = [
    train_case("Sennrich's corpus (low 5, lower 2, newest 6, widest 3), 10 merges: ('e', 's'), ('s', 't') "
               "and ('t', '</w>') tie at 9, the greatest, ('t', '</w>'), is merged first", "ties", 10,
               words=repeat(("low", 5), ("lower", 2), ("newest", 6), ("widest", 3))),
    train_case("ab 3 times, cd once: ('a', 'b') and ('b', '</w>') (3 each) beat ('c', 'd') and "
               "('d', '</w>') (1 each)", "word frequencies", 2, words=repeat(("ab", 3), ("cd", 1))),
    train_case("abc 4 times: after ('c', '</w>') the pair ('b', 'c') is gone, and ('b', 'c</w>') "
               "ties with ('a', 'b')", "a pair that disappears", 3, words=("abc",) * 4),
    train_case("aaa twice, bc 3 times: ('a', 'a') counts 4 (twice in each aaa) and wins; the merge makes "
               "aa a </w>", "overlapping pairs", 4, words=repeat(("aaa", 2), ("bc", 3))),
    train_case("hug 10, pug 5, pun 12, bun 4, hugs 5 (Hugging Face's course), 6 merges: ('u', 'g') (20) "
               "first", "worked by hand", 6,
               words=repeat(("hug", 10), ("pug", 5), ("pun", 12), ("bun", 4), ("hugs", 5))),
    train_case("ab once, 5 merges asked: after 2 every word is one symbol, so 2 merges", "fewer pairs than "
               "num_merges", 5, words=("ab",)),
    train_case("0 merges asked", "fewer pairs than num_merges", 0, words=("low", "lower")),
    train_case("60 seeded random words of a, b, c, 15 merges", "random corpus", 15, seed=7,
               random=(60, "abc", 5)),
    train_case("the first 200 English training sentences, 30 merges", "the course's corpus", 30,
               corpus=("en", "train", 200)),
]


# ---------------------------------------------------------------- outputs as tensors


def as_tensor(value) -> torch.Tensor:
    """Lists of strings as a tensor (its JSON, character by character): what records hold."""
    return torch.tensor([ord(c) for c in json.dumps(value)], dtype=torch.long)


def from_tensor(tensor: torch.Tensor):
    """The lists :func:`as_tensor` wrote."""
    return json.loads("".join(map(chr, tensor.tolist())))


def expect_merges(result, where: str) -> list[list[str]]:
    """The merges (a list of tuples (a, b) of two strings) as lists [a, b], or a failure that says what came
    back."""
    shape = f"{NAME} should return a list of tuples (a, b) of two strings, in the order they were merged"
    if not isinstance(result, list):
        raise CheckFailure(f"{shape}, but returned a {type(result).__name__} in {where}.")
    merges = []
    for k, pair in enumerate(result):
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) for s in pair):
            raise CheckFailure(f"{shape}; merge {k + 1} is the list {pair!r} in {where}: make each merge a "
                               f"tuple, {tuple(pair)!r} (merges are looked up in sets and dicts, where a "
                               "list cannot go).")
        if not isinstance(pair, tuple) or len(pair) != 2 or not all(isinstance(s, str) for s in pair):
            raise CheckFailure(f"{shape}; merge {k + 1} is {pair!r} in {where}: a merge is the pair of "
                               "symbols it joins, such as ('e', 's'), not the new symbol.")
        merges.append([pair[0], pair[1]])
    return merges


def shown(item) -> str:
    """A merge as the tuple it is, a token as the string it is."""
    return repr(item if isinstance(item, str) else tuple(item))


def first_difference(got: Sequence, want: Sequence, what: str,
                     show: Callable[[object], str] | None = None) -> str:
    """Where two lists (of merges, or of tokens) first differ, in words (1-based), each item as
    ``show`` writes it (default: :func:`shown`)."""
    show = show or shown
    for k, (mine, theirs) in enumerate(zip(got, want)):
        if mine != theirs:
            return f"{what} {k + 1} is {show(mine)} where the contract's is {show(theirs)}" + (
                f" (the first {k} agree)" if k else "")
    return (f"it returned {len(got)} {what}s where the contract makes {len(want)} (the first "
            f"{min(len(got), len(want))} agree)")


def _snapshot(case: Case, kind: str):
    """The :data:`EXPECTED` merges ``kind`` (the reference, or a mistake's name) of ``case`` as outputs;
    None for a mistake that returns the reference's merges there."""
    entry = EXPECTED[case.name].get(kind)
    return None if entry is None else {"merges": as_tensor(entry)}


class BpeTrain(Exercise):
    name = NAME
    reference_name = "the merges the contract makes"
    mistakes = {m: (lambda case, device, m=m: _snapshot(case, m.name)) for m in MISTAKES}
    visible_cases = CASES
    output = "merges"

    def run(self, impl, case, device):
        words = words_of(case)
        given = copy.deepcopy(words)
        result = self.call(case, impl, words, case.params["num_merges"])
        if words != given:
            raise CheckFailure(f"{NAME} changed the list of words it was given in {case}: keep the training "
                               "text as it is and work on your own copy of the words' symbols.")
        return {"merges": as_tensor(expect_merges(result, str(case)))}

    def reference(self, case, device):
        return _snapshot(case, "reference")

    def evaluate(self, case, got, device):
        mine, want = from_tensor(got[self.output]), from_tensor(self.expected(case, device)[self.output])
        if mine == want:
            return
        mistake = self.diagnose(case, mine, device)
        raise CheckFailure(f"{self.name}: {first_difference(mine, want, 'merge')} in {case}.\n" +
                           (mistake.sentence() if mistake else self.rule), mistake)

    rule = RULE

    def diagnose(self, case: Case, mine, device) -> Mistake | None:
        """The first known mistake whose output is ``mine`` (and not the reference's) on ``case``."""
        for mistake, run in self.mistakes.items():
            variant = run(case, device)
            if variant is not None and from_tensor(variant[self.output]) == mine:
                return mistake
        return None


@visible_check
def check_bpe_train(bpe_train) -> None:
    """On corpora worked by hand (ties, a pair that disappears after a merge, "aaa", word frequencies),
    fewer pairs than merges asked, a seeded random corpus and the course's English: the merges, in order."""
    BpeTrain().run_cases(bpe_train)
    passed("bpe_train merges the most frequent pair each round, breaks ties by the greatest pair, keeps "
           "its counts up to date and counts every word as often as it occurs.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": merges, mistake name: merges where
#: that mistake returns others}}.
EXPECTED: dict[str, dict[str, list]] = {
    ("Sennrich's corpus (low 5, lower 2, newest 6, widest 3), 10 merges: ('e', 's'), ('s', "
     "'t') and ('t', '</w>') tie at 9, the greatest, ('t', '</w>'), is merged first"): {
        'reference': [['t', '</w>'], ['s', 't</w>'], ['e', 'st</w>'], ['o', 'w'], ['l', 'ow'],
            ['w', 'est</w>'], ['n', 'e'], ['ne', 'west</w>'], ['low', '</w>'], ['w',
            'i']],
        'no_end_of_word': [['s', 't'], ['e', 'st'], ['o', 'w'], ['l', 'ow'], ['w', 'est'], ['n',
            'e'], ['ne', 'west'], ['w', 'i'], ['wi', 'd'], ['wid', 'est']],
        'end_of_word_glued': [['s', 't</w>'], ['e', 'st</w>'], ['l', 'o'], ['w', 'est</w>'],
            ['n', 'e'], ['ne', 'west</w>'], ['lo', 'w</w>'], ['w', 'i'], ['wi',
            'd'], ['wid', 'est</w>']],
        'word_frequencies': [['w', 'e'], ['t', '</w>'], ['s', 't</w>'], ['l', 'o'], ['we',
            'st</w>'], ['we', 'r'], ['wer', '</w>'], ['w', 'i'], ['wi', 'd'],
            ['wid', 'e']],
        'stale_counts': [['t', '</w>'], ['s', 't'], ['e', 's'], ['w', 'e'], ['o', 'w'], ['l',
            'o'], ['n', 'e'], ['e', 'w'], ['w', '</w>'], ['w', 'i']],
        'ties': [['e', 's'], ['es', 't'], ['est', '</w>'], ['l', 'o'], ['lo', 'w'], ['e', 'w'],
            ['ew', 'est</w>'], ['n', 'ewest</w>'], ['low', '</w>'], ['d', 'est</w>']],
    },
    ("ab 3 times, cd once: ('a', 'b') and ('b', '</w>') (3 each) beat ('c', 'd') and ('d', "
     "'</w>') (1 each)"): {
        'reference': [['b', '</w>'], ['a', 'b</w>']],
        'no_end_of_word': [['a', 'b'], ['c', 'd']],
        'end_of_word_glued': [['a', 'b</w>'], ['c', 'd</w>']],
        'word_frequencies': [['d', '</w>'], ['c', 'd</w>']],
        'stale_counts': [['b', '</w>'], ['a', 'b']],
        'ties': [['a', 'b'], ['ab', '</w>']],
    },
    ("abc 4 times: after ('c', '</w>') the pair ('b', 'c') is gone, and ('b', 'c</w>') ties "
     "with ('a', 'b')"): {
        'reference': [['c', '</w>'], ['b', 'c</w>'], ['a', 'bc</w>']],
        'no_end_of_word': [['b', 'c'], ['a', 'bc']],
        'end_of_word_glued': [['b', 'c</w>'], ['a', 'bc</w>']],
        'stale_counts': [['c', '</w>'], ['b', 'c'], ['a', 'b']],
        'ties': [['a', 'b'], ['ab', 'c'], ['abc', '</w>']],
    },
    ("aaa twice, bc 3 times: ('a', 'a') counts 4 (twice in each aaa) and wins; the merge "
     'makes aa a </w>'): {
        'reference': [['a', 'a'], ['c', '</w>'], ['b', 'c</w>'], ['aa', 'a']],
        'no_end_of_word': [['a', 'a'], ['b', 'c'], ['aa', 'a']],
        'end_of_word_glued': [['b', 'c</w>'], ['a', 'a</w>'], ['a', 'aa</w>']],
        'overlap': [['c', '</w>'], ['b', 'c</w>'], ['a', 'a'], ['aa', 'a']],
        'stale_counts': [['a', 'a'], ['c', '</w>'], ['b', 'c'], ['a', '</w>']],
        'ties': [['a', 'a'], ['b', 'c'], ['bc', '</w>'], ['a', '</w>']],
    },
    "hug 10, pug 5, pun 12, bun 4, hugs 5 (Hugging Face's course), 6 merges: ('u', 'g') (20) first": {
        'reference': [['u', 'g'], ['u', 'n'], ['un', '</w>'], ['ug', '</w>'], ['p', 'un</w>'],
            ['h', 'ug</w>']],
        'no_end_of_word': [['u', 'g'], ['u', 'n'], ['h', 'ug'], ['p', 'un'], ['p', 'ug'],
            ['hug', 's']],
        'end_of_word_glued': [['p', 'u'], ['h', 'u'], ['pu', 'n</w>'], ['hu', 'g</w>'], ['pu',
            'g</w>'], ['hu', 'g']],
        'word_frequencies': [['u', 'g'], ['ug', '</w>'], ['u', 'n'], ['un', '</w>'], ['ug',
            's'], ['ugs', '</w>']],
        'stale_counts': [['u', 'g'], ['p', 'u'], ['u', 'n'], ['n', '</w>'], ['h', 'u'], ['g',
            '</w>']],
        'ties': [['u', 'g'], ['n', '</w>'], ['u', 'n</w>'], ['h', 'ug'], ['p', 'un</w>'],
            ['hug', '</w>']],
    },
    'ab once, 5 merges asked: after 2 every word is one symbol, so 2 merges': {
        'reference': [['b', '</w>'], ['a', 'b</w>']],
        'no_end_of_word': [['a', 'b']],
        'end_of_word_glued': [['a', 'b</w>']],
        'stale_counts': [['b', '</w>'], ['a', 'b']],
        'ties': [['a', 'b'], ['ab', '</w>']],
    },
    '0 merges asked': {
        'reference': [],
    },
    '60 seeded random words of a, b, c, 15 merges': {
        'reference': [['a', '</w>'], ['c', '</w>'], ['b', 'b'], ['c', 'b'], ['a', 'a</w>'],
            ['a', 'b'], ['bb', '</w>'], ['a', 'c</w>'], ['cb', '</w>'], ['c', 'c</w>'],
            ['c', 'c'], ['c', 'a</w>'], ['a', 'c'], ['c', 'bb</w>'], ['ab', '</w>']],
        'no_end_of_word': [['b', 'b'], ['a', 'a'], ['b', 'c'], ['a', 'c'], ['b', 'a'], ['c',
            'c'], ['c', 'b'], ['c', 'a'], ['c', 'bb'], ['bc', 'c'], ['cb', 'aa'],
            ['bc', 'b'], ['bb', 'bb'], ['b', 'aa'], ['ac', 'c']],
        'end_of_word_glued': [['a', 'a</w>'], ['c', 'b'], ['a', 'b'], ['b', 'b'], ['a',
            'c</w>'], ['c', 'c</w>'], ['c', 'b</w>'], ['c', 'c'], ['c',
            'a</w>'], ['a', 'c'], ['cb', 'b</w>'], ['b', 'b</w>'], ['a',
            'b</w>'], ['a', 'ab'], ['cb', 'c</w>']],
        'word_frequencies': [['a', '</w>'], ['c', '</w>'], ['b', 'b'], ['c', 'a'], ['c', 'b'],
            ['a', 'b'], ['c', 'c</w>'], ['bb', '</w>'], ['a', 'a</w>'], ['ca',
            'a</w>'], ['cb', '</w>'], ['ca', 'c</w>'], ['cb', 'c</w>'], ['cb',
            'a</w>'], ['ca', 'b']],
        'overlap': [['a', '</w>'], ['c', '</w>'], ['b', '</w>'], ['a', 'a</w>'], ['c', 'b'],
            ['a', 'b'], ['a', 'c</w>'], ['c', 'c</w>'], ['c', 'b</w>'], ['b', 'b'], ['c',
            'aa</w>'], ['c', 'a</w>'], ['cb', 'b</w>'], ['c', 'ac</w>'], ['b', 'b</w>']],
        'stale_counts': [['a', '</w>'], ['c', '</w>'], ['b', 'b'], ['b', '</w>'], ['c', 'b'],
            ['b', 'c'], ['a', 'a'], ['c', 'a'], ['b', 'a'], ['a', 'b'], ['c', 'c'],
            ['a', 'c']],
        'ties': [['a', '</w>'], ['c', '</w>'], ['b', 'b'], ['c', 'b'], ['a', 'a</w>'], ['a',
            'b'], ['bb', '</w>'], ['a', 'c</w>'], ['a', 'c'], ['c', 'c'], ['cb', '</w>'],
            ['c', 'a</w>'], ['ab', '</w>'], ['c', 'bb</w>'], ['c', 'c</w>']],
    },
    'the first 200 English training sentences, 30 merges': {
        'reference': [['e', '</w>'], ['h', 'e</w>'], ['s', '</w>'], ['t', 'he</w>'], ['r', 'e'],
            ['a', 't'], ['d', '</w>'], ['e', 's</w>'], ['a', '</w>'], ['s', 'e</w>'],
            ['o', 'u'], ['a', 'k'], ['b', 'i'], ['g', 're'], ['k', '</w>'], ['y',
            '</w>'], ['t', 'ak'], ['e', 'at'], ['g', '</w>'], ['c', 'h'], ['s', 'e'],
            ['l', 'a'], ['la', 'c'], ['lac', 'k</w>'], ['b', 'lack</w>'], ['o', 'r'],
            ['h', 'or'], ['i', 'n'], ['f', 'in'], ['bi', 'r']],
        'no_end_of_word': [['h', 'e'], ['t', 'he'], ['s', 'e'], ['r', 'e'], ['a', 't'], ['o',
            'u'], ['k', 'e'], ['a', 'ke'], ['b', 'i'], ['g', 're'], ['t', 'ake'],
            ['e', 'at'], ['se', 'e'], ['l', 'a'], ['la', 'c'], ['lac', 'k'], ['b',
            'lack'], ['r', 'se'], ['o', 'rse'], ['h', 'orse'], ['r', 'd'], ['n',
            'd'], ['i', 'nd'], ['f', 'ind'], ['bi', 'rd'], ['o', 'w'], ['gre',
            'y'], ['o', 'g'], ['d', 'og'], ['c', 'he']],
        'end_of_word_glued': [['h', 'e</w>'], ['t', 'he</w>'], ['r', 'e'], ['e', 's</w>'], ['s',
            'e</w>'], ['a', 'k'], ['b', 'i'], ['g', 're'], ['a', 't'], ['t',
            'ak'], ['h', 'o'], ['s', 'e'], ['l', 'a'], ['la', 'c'], ['lac',
            'k</w>'], ['b', 'lack</w>'], ['ho', 'r'], ['a', 't</w>'], ['i',
            'n'], ['f', 'in'], ['bi', 'r'], ['o', 'u'], ['h', 'e'], ['gre',
            'y</w>'], ['hor', 'se</w>'], ['d', 's</w>'], ['d', 'o'], ['at',
            's</w>'], ['s', 'm'], ['sm', 'a']],
        'word_frequencies': [['s', '</w>'], ['e', '</w>'], ['e', 's</w>'], ['a', 't'], ['o',
            'u'], ['s', 'e</w>'], ['r', 'e'], ['o', 'w'], ['d', '</w>'], ['c',
            'a'], ['h', 'e</w>'], ['e', 'at'], ['c', 'h'], ['b', 'i'], ['a',
            'n'], ['y', '</w>'], ['w', 'at'], ['wat', 'ch'], ['w', 'an'],
            ['wan', 't'], ['t', 'a'], ['ta', 'k'], ['s', 'es</w>'], ['s', 'e'],
            ['r', 's</w>'], ['r', '</w>'], ['p', 'p'], ['pp', 'l'], ['ow', 'e'],
            ['ou', 'se</w>']],
        'stale_counts': [['e', '</w>'], ['h', 'e'], ['s', '</w>'], ['t', 'h'], ['s', 'e'], ['r',
            'e'], ['e', 's'], ['a', 't'], ['d', '</w>'], ['e', 'e'], ['a', '</w>'],
            ['o', 'u'], ['k', 'e'], ['a', 'k'], ['b', 'i'], ['e', 'a'], ['g', 'r'],
            ['t', '</w>'], ['c', 'a'], ['w', 'a'], ['k', '</w>'], ['y', '</w>'],
            ['r', 's'], ['e', 'y'], ['t', 'a'], ['h', 'o'], ['g', '</w>'], ['c',
            'h'], ['l', 'a'], ['c', 'k']],
        'ties': [['e', '</w>'], ['h', 'e</w>'], ['s', '</w>'], ['t', 'he</w>'], ['r', 'e'],
            ['a', 't'], ['d', '</w>'], ['e', 's</w>'], ['a', '</w>'], ['s', 'e</w>'], ['o',
            'u'], ['a', 'k'], ['b', 'i'], ['g', 're'], ['k', '</w>'], ['y', '</w>'], ['e',
            'at'], ['t', 'ak'], ['c', 'h'], ['g', '</w>'], ['s', 'e'], ['a', 'c'], ['ac',
            'k</w>'], ['b', 'l'], ['bl', 'ack</w>'], ['h', 'o'], ['ho', 'r'], ['bi', 'r'],
            ['f', 'i'], ['fi', 'n']],
    },
}
