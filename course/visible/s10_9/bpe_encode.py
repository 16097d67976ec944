"""``bpe_encode``: the exercise and its visible check: words encoded with merges written by hand (where
their order matters, repeated pairs) and with merges ``bpe_train`` learns on small corpora and on the
course's English; its known mistakes and the messages both sides give.

This module ships no encoder: :data:`EXPECTED` holds, for each visible case, the contract's tokens and
what each known mistake returns where it differs, as grading's encoder computes them (a test holds
the two equal)."""

from __future__ import annotations

import copy

from course.checking import Case, CheckFailure, Mistake, passed, visible_check
from course.visible.s10_9 import bpe_train
from course.visible.s10_9.bpe_train import EOW, BpeTrain, as_tensor, first_difference

NAME = "bpe_encode"
RULE = (f"Start from the word's characters followed by {EOW!r}; then take the merges in the order they were "
        "learned and apply each to the whole word, every occurrence, left to right, before the next.")
GREEDY = Mistake("greedy_longest", "a greedy longest match against the merged symbols instead of the merges "
                 "in their learned order", "The tokens are what training would have made of the word: the "
                 "merges one after the other in their learned order, not the longest symbol that fits.")
NO_EOW = Mistake("encode_no_end_of_word", f"the word encoded without its end-of-word marker {EOW!r}",
                 f"Training saw every word as its characters followed by {EOW!r}: start from the same "
                 "symbols, or merges that end a word never apply.")
FIRST_ONLY = Mistake("first_only", "each merge applied to its first occurrence in the word only",
                     "A merge joins every occurrence of its pair in the word (left to right, without "
                     "overlap), as in training.")
#: The mistakes wrong tokens are compared with (the first that matches is named).
MISTAKES = (NO_EOW, GREEDY, FIRST_ONLY)

#: Cases whose merges are the contract's merges of a bpe_train case (its name): the rest give them.
SENNRICH = bpe_train.CASES[0]
ENGLISH = bpe_train.CASES[-1]


def encode_case(name: str, kind: str, word: str, merges=None, trained: Case | None = None) -> Case:
    """A case of ``bpe_encode``: a word and its merges, given (``merges``) or the contract's merges of
    the bpe_train case ``trained``. Kinds: "merges learned on a small corpus", "merge order matters",
    "repeated pairs", "characters never merged", "no merges", "merges of the course's corpus"."""
    params = {"word": word, "merges": tuple(map(tuple, merges or ())), "trained": trained}
    return Case(name, 0, params, kind=kind)


CASES = [
    encode_case("newest with the merges of Sennrich's corpus (a training word)",
                "merges learned on a small corpus", "newest", trained=SENNRICH),
    encode_case("lowest with the same merges (a word never trained on)", "merges learned on a small corpus",
                "lowest", trained=SENNRICH),
    encode_case("abc with the merges (b, c) then (a, b): a bc </w>, since (a, b) is gone when its turn comes",
                "merge order matters", "abc", merges=[("b", "c"), ("a", "b")]),
    encode_case("aaaaa with (a, a) then (aa, a): aa aa a </w>, then aa aaa </w>", "repeated pairs", "aaaaa",
                merges=[("a", "a"), ("aa", "a")]),
    encode_case("zoo with Sennrich's merges: z and the o's were never merged", "characters never merged",
                "zoo", trained=SENNRICH),
    encode_case("hi with no merges: h i </w>", "no merges", "hi"),
    encode_case("o, a word of one letter, with Sennrich's merges", "one letter", "o", trained=SENNRICH),
    encode_case("cheeses (never in the corpus) with 30 merges of the course's English",
                "merges of the course's corpus", "cheeses", trained=ENGLISH),
    encode_case("the with the same merges", "merges of the course's corpus", "the", trained=ENGLISH),
]


def expect_tokens(result, where: str) -> list[str]:
    """The tokens as a list of strings, or a failure that says what came back."""
    if isinstance(result, str):
        raise CheckFailure(f"{NAME} should return a list of strings (the word's tokens), but returned the "
                           f"string {result!r} in {where}: return a list even when the word is one token (a "
                           "word of one letter).")
    if not isinstance(result, (list, tuple)) or not all(isinstance(t, str) for t in result):
        kind = type(result).__name__
        raise CheckFailure(f"{NAME} should return a list of strings (the word's tokens), but returned a "
                           f"{kind}{' holding other things' if isinstance(result, (list, tuple)) else ''} in "
                           f"{where}.")
    return list(result)


def _snapshot(case: Case, kind: str):
    entry = EXPECTED[case.name].get(kind)
    return None if entry is None else {"tokens": as_tensor(entry)}


class BpeEncode(BpeTrain):
    name = NAME
    reference_name = "the contract's tokens"
    mistakes = {m: (lambda case, device, m=m: _snapshot(case, m.name)) for m in MISTAKES}
    visible_cases = CASES
    output = "tokens"
    rule = RULE

    def merges_of(self, case: Case) -> list[tuple[str, str]]:
        """The case's merges: given, or the contract's merges of its bpe_train case."""
        trained = case.params["trained"]
        if trained is None:
            return [tuple(m) for m in case.params["merges"]]
        return [tuple(m) for m in bpe_train.EXPECTED[trained.name]["reference"]]

    def run(self, impl, case, device):
        word, merges = case.params["word"], self.merges_of(case)
        given = copy.deepcopy(merges)
        result = self.call(case, impl, word, merges)
        if merges != given:
            raise CheckFailure(f"{NAME} changed the list of merges it was given in {case}: read it, leave it "
                               "as it is.")
        tokens = expect_tokens(result, str(case))
        if "".join(tokens) not in (word + EOW, word):
            raise CheckFailure(f"{NAME}'s tokens, joined, spell {''.join(tokens)!r} in {case}: they should "
                               f"spell the word followed by {EOW!r}, every character once, in order.")
        return {"tokens": as_tensor(tokens)}

    def reference(self, case, device):
        return _snapshot(case, "reference")

    def evaluate(self, case, got, device):
        mine, want = from_tokens(got), from_tokens(self.expected(case, device))
        if mine == want:
            return
        mistake = self.diagnose(case, mine, device)
        raise CheckFailure(f"{NAME}: {first_difference(mine, want, 'token')} in {case}.\n" +
                           (mistake.sentence() if mistake else RULE), mistake)


def from_tokens(outputs) -> list[str]:
    return bpe_train.from_tensor(outputs["tokens"])


@visible_check
def check_bpe_encode(bpe_encode) -> None:
    """Merges where their order matters, repeated pairs, characters never merged, no merges, merges learned
    on small corpora and on the course's English: the tokens, the end-of-word marker included."""
    BpeEncode().run_cases(bpe_encode)
    passed("bpe_encode applies the merges in their learned order, every occurrence, and keeps the "
           "end-of-word marker.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": tokens, mistake name: tokens where
#: that mistake returns others}}.
EXPECTED: dict[str, dict[str, list]] = {
    "newest with the merges of Sennrich's corpus (a training word)": {
        'reference': ['newest</w>'],
        'encode_no_end_of_word': ['ne', 'w', 'e', 's', 't'],
    },
    'lowest with the same merges (a word never trained on)': {
        'reference': ['low', 'est</w>'],
        'encode_no_end_of_word': ['low', 'e', 's', 't'],
    },
    'abc with the merges (b, c) then (a, b): a bc </w>, since (a, b) is gone when its turn comes': {
        'reference': ['a', 'bc', '</w>'],
        'encode_no_end_of_word': ['a', 'bc'],
        'greedy_longest': ['ab', 'c', '</w>'],
    },
    'aaaaa with (a, a) then (aa, a): aa aa a </w>, then aa aaa </w>': {
        'reference': ['aa', 'aaa', '</w>'],
        'encode_no_end_of_word': ['aa', 'aaa'],
        'greedy_longest': ['aaa', 'aa', '</w>'],
        'first_only': ['aaa', 'a', 'a', '</w>'],
    },
    "zoo with Sennrich's merges: z and the o's were never merged": {
        'reference': ['z', 'o', 'o', '</w>'],
        'encode_no_end_of_word': ['z', 'o', 'o'],
    },
    'hi with no merges: h i </w>': {
        'reference': ['h', 'i', '</w>'],
        'encode_no_end_of_word': ['h', 'i'],
    },
    "o, a word of one letter, with Sennrich's merges": {
        'reference': ['o', '</w>'],
        'encode_no_end_of_word': ['o'],
    },
    "cheeses (never in the corpus) with 30 merges of the course's English": {
        'reference': ['ch', 'e', 'e', 's', 'es</w>'],
        'encode_no_end_of_word': ['ch', 'e', 'e', 'se', 's'],
        'greedy_longest': ['ch', 'e', 'e', 'se', 's</w>'],
    },
    'the with the same merges': {
        'reference': ['the</w>'],
        'encode_no_end_of_word': ['t', 'h', 'e'],
    },
}
