"""``byte_bpe_train``: the exercise and its visible check, on texts worked by hand (ties, pre-token
boundaries, overlapping pairs), texts with characters of two to four bytes, and the course's English;
its known mistakes and the messages both sides give.

This module ships no trainer: :data:`EXPECTED` holds, for each visible case, the contract's merges and
what each known mistake returns where it differs, as grading's trainer computes them (a test holds the
two equal). What the three byte-level exercises share lives here too: the given pre-tokenizer (GPT-2's
pattern), texts, bytes as records, and the engine of a check whose references are snapshots.
"""

from __future__ import annotations

import copy

import regex

from course.checking import Case, CheckFailure, Exercise, Mistake, passed, visible_check
from course.visible.s10_9 import bpe_train
from course.visible.s10_9.bpe_train import BpeTrain, as_tensor, from_tensor, random_words

NAME = "byte_bpe_train"
#: GPT-2's pre-tokenization pattern (as CS336 writes it): contractions, letters, digits, other
#: symbols, each with at most one space in front; runs of spaces.
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def pretokenize(text: str) -> list[str]:
    """GPT-2's pre-tokens of ``text``, in order: they spell ``text`` exactly (the notebook gives it)."""
    return regex.findall(GPT2_PATTERN, text)


RULE = ("Split each text with pretokenize; a pre-token is its UTF-8 bytes, each byte a symbol bytes([b]). "
        "Each round, count every adjacent pair of symbols inside each pre-token (never across two), merge "
        "the most frequent everywhere, left to right, and record it; among pairs of the same count the "
        "greatest, compared as tuples of bytes, wins.")
ACROSS = Mistake("across_pretokens",
                 "pairs counted across pre-tokens: the text's bytes taken as one sequence",
                 "Split every text with pretokenize first and count pairs inside each pre-token only: a "
                 "merge never joins the end of one pre-token to the next (GPT-2's rule, so that 'dog.' "
                 "and 'dog!' share 'dog').")
CHARACTERS = Mistake("characters_as_symbols", "characters taken as symbols instead of bytes",
                     "A pre-token starts as its UTF-8 bytes, one symbol per byte: 'é' is two symbols, "
                     "b'\\xc3' and b'\\xa9', and an emoji four. list(piece.encode('utf-8')) gives the "
                     "bytes as numbers; bytes([b]) makes a symbol of one.")
FIRST_TIE = Mistake("ties_first_occurrence", "ties between equally frequent pairs broken by first occurrence",
                    "Among the pairs of the highest count, merge the greatest as Python orders tuples of "
                    "bytes (max with a key of (count, pair)), not the first one counted.")
RIGHT_TO_LEFT = Mistake("merge_right_to_left", "each merge applied from the right: a a a became a aa",
                        "Join the pair's occurrences from the left, without overlap: b'a' b'a' b'a' becomes "
                        "b'aa' b'a'.")
#: The mistakes a wrong list of merges is compared with (the first that matches is named).
MISTAKES = (ACROSS, CHARACTERS, FIRST_TIE, RIGHT_TO_LEFT)


# ---------------------------------------------------------------- texts and records


def course_sentences(side: str, split: str, sentences: int) -> list[str]:
    """The first ``sentences`` sentences of one split of the course's corpus (``side`` "en" or "fr")."""
    from course.translation import load_pairs

    return [en if side == "en" else fr for fr, en in load_pairs(split=split)[:sentences]]


def texts_of(case: Case) -> list[str]:
    """A case's training texts: given, seeded random, or from the course's corpus."""
    p = case.params
    if "texts" in p:
        return list(p["texts"])
    if "random" in p:
        return random_words(case.seed, *p["random"])  # an alphabet with spaces: texts of a few words
    return course_sentences(*p["corpus"])


def plain(value):
    """Bytes as lists of numbers, tuples as lists, all the way down: what JSON (and records) hold."""
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def record(value):
    """``value`` (bytes, strings, lists of them) as a tensor of its JSON."""
    return as_tensor(plain(value))


def shown(value) -> str:
    """Numbers back as bytes literals, for messages: [104, 105] -> b'hi', a merge [[104], [105]] ->
    (b'h', b'i')."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return repr(bytes(value))
    if isinstance(value, list):
        return "(" + ", ".join(shown(v) for v in value) + ")"
    return repr(value)


def first_difference(got: list, want: list, what: str) -> str:
    """Where two lists first differ, in words (1-based), bytes shown as bytes literals."""
    return bpe_train.first_difference(got, want, what, show=shown)


class SnapshotExercise(Exercise):
    """A check whose reference and known mistakes are snapshots (:meth:`table`, the module's
    ``EXPECTED``) on the visible side; grading's subclass computes them."""

    output = ""
    what = ""  # one item of the output, in messages: "merge", "token"
    rule = RULE
    known: tuple[Mistake, ...] = ()

    def table(self) -> dict:
        raise NotImplementedError

    def snapshotted(self, case: Case, kind: str):
        """The outputs :meth:`table` holds for ``case``: the reference's, or a mistake's (None where
        that mistake returns the reference's)."""
        entry = self.table()[case.name].get(kind)
        return None if entry is None else {self.output: record(entry)}

    @property
    def mistakes(self):
        return {m: (lambda case, device, m=m: self.snapshotted(case, m.name)) for m in self.known}

    def reference(self, case, device):
        return self.snapshotted(case, "reference")

    def evaluate(self, case, got, device):
        mine = from_tensor(got[self.output])
        want = from_tensor(self.expected(case, device)[self.output])
        if mine == want:
            return
        mistake = self.diagnose(case, mine, device)
        where = (first_difference(mine, want, self.what) if isinstance(want, list) else
                 f"it returned {mine!r} where the contract's is {want!r}")
        said = mistake.sentence() if mistake else self.rule
        raise CheckFailure(f"{self.name}: {where} in {case}.\n{said}", mistake)

    diagnose = BpeTrain.diagnose  # the first known mistake whose snapshot is the learner's output


# ---------------------------------------------------------------- the exercise


def train_case(name: str, kind: str, num_merges: int, seed: int = 0, **texts) -> Case:
    """A case of ``byte_bpe_train``: its texts (``texts``, ``random`` = (count, alphabet, longest) or
    ``corpus`` = (side, split, sentences)) and ``num_merges``. Kinds: "worked by hand", "ties",
    "pre-token boundaries", "overlapping pairs", "characters of several bytes", "fewer pairs than
    num_merges", "random texts", "the course's corpus"."""
    return Case(name, seed, {"num_merges": num_merges, **texts}, kind=kind)


CASES = [
    train_case("the CS336 handout example (low 5, lower 2, widest 3, newest 6 as one text), 6 merges",
               "worked by hand", 6, texts=("low low low low low lower lower widest widest widest newest "
                                           "newest newest newest newest newest",)),
    train_case("ab and ba: ('a', 'b'), (' ', 'b') and ('b', 'a') tie at 1, the greatest, (b'b', b'a'), "
               "first", "ties", 3, texts=("ab ba",)),
    train_case("a b a b a b: inside pre-tokens (b' ', b'b') counts 3 and wins; across them "
               "(b'a', b' ') would tie with it", "pre-token boundaries", 2, texts=("a b a b a b",)),
    train_case("aaa twice: (b'a', b'a') counts 4 (twice in each), and the merge makes aa a",
               "overlapping pairs", 3, texts=("aaa aaa",)),
    train_case("café, crème, déjà, straße, 🙂 (é is two bytes, the emoji four)",
               "characters of several bytes", 8, texts=("café crème", "déjà été", "straße 🙂 🙂")),
    train_case("ab alone, 5 merges asked: 1 is possible", "fewer pairs than num_merges", 5, texts=("ab",)),
    train_case("0 merges asked", "fewer pairs than num_merges", 0, texts=("low lower",)),
    train_case("40 seeded random texts of a, b, é and spaces, 12 merges", "random texts", 12, seed=7,
               random=(40, "abé  ", 8)),
    train_case("the first 200 English training sentences, 30 merges", "the course's corpus", 30,
               corpus=("en", "train", 200)),
]


def expect_merges(result, where: str) -> list[tuple[bytes, bytes]]:
    """The merges as pairs of bytes, or a failure that says what came back."""
    shape = f"{NAME} should return a list of pairs (a, b) of bytes, in the order they were merged"
    if not isinstance(result, (list, tuple)):
        raise CheckFailure(f"{shape}, but returned a {type(result).__name__} in {where}.")
    for k, pair in enumerate(result):
        two_bytes = isinstance(pair, (list, tuple)) and len(pair) == 2
        if not (two_bytes and all(isinstance(s, bytes) for s in pair)):
            raise CheckFailure(f"{shape}; merge {k + 1} is {pair!r} in {where}: a merge is the pair of "
                               "symbols it joins, each a bytes object, such as (b'e', b's').")
    return [tuple(pair) for pair in result]


class ByteBpeTrain(SnapshotExercise):
    name = NAME
    reference_name = "the merges the contract makes"
    visible_cases = CASES
    output, what, known = "merges", "merge", MISTAKES

    def table(self):
        return EXPECTED

    def run(self, impl, case, device):
        texts = texts_of(case)
        given = copy.deepcopy(texts)
        result = self.call(case, impl, texts, case.params["num_merges"])
        if texts != given:
            raise CheckFailure(f"{NAME} changed the list of texts it was given in {case}: leave it as it is.")
        return {"merges": record(expect_merges(result, str(case)))}


@visible_check
def check_byte_bpe_train(byte_bpe_train) -> None:
    """Texts worked by hand (ties, pre-token boundaries, "aaa"), characters of two to four bytes, fewer
    pairs than merges asked, seeded random texts and the course's English: the merges, in order."""
    ByteBpeTrain().run_cases(byte_bpe_train)
    passed("byte_bpe_train counts pairs of bytes inside pre-tokens, merges left to right and breaks ties "
           "by the greatest pair.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": merges, mistake name: merges where
#: that mistake returns others}}.
EXPECTED: dict[str, dict[str, list]] = {
    'the CS336 handout example (low 5, lower 2, widest 3, newest 6 as one text), 6 merges': {
        'reference': [
            (b's', b't'), (b'e', b'st'), (b'o', b'w'), (b'l', b'ow'), (b'w', b'est'), (b'n', b'e'),
        ],
        'across_pretokens': [
            (b's', b't'), (b'e', b'st'), (b'est', b' '), (b'o', b'w'), (b'l', b'ow'), (b'n', b'e'),
        ],
        'ties_first_occurrence': [
            (b'e', b's'), (b'es', b't'), (b'l', b'o'), (b'lo', b'w'), (b' ', b'low'), (b' ', b'n'),
        ],
    },
    "ab and ba: ('a', 'b'), (' ', 'b') and ('b', 'a') tie at 1, the greatest, (b'b', b'a'), first": {
        'reference': [
            (b'b', b'a'), (b'a', b'b'), (b' ', b'ba'),
        ],
        'across_pretokens': [
            (b'b', b'a'), (b'b', b' '), (b'b ', b'ba'),
        ],
        'ties_first_occurrence': [
            (b'a', b'b'), (b' ', b'b'), (b' b', b'a'),
        ],
    },
    ("a b a b a b: inside pre-tokens (b' ', b'b') counts 3 and wins; across them (b'a', b' ') would tie "
     'with it'): {
        'reference': [
            (b' ', b'b'), (b' ', b'a'),
        ],
        'across_pretokens': [
            (b'a', b' '), (b'a ', b'b'),
        ],
    },
    "aaa twice: (b'a', b'a') counts 4 (twice in each), and the merge makes aa a": {
        'reference': [
            (b'a', b'a'), (b'aa', b'a'), (b' ', b'aaa'),
        ],
        'across_pretokens': [
            (b'a', b'a'), (b'aa', b'a'), (b'aaa', b' '),
        ],
        'merge_right_to_left': [
            (b'a', b'a'), (b'a', b'aa'), (b' ', b'aaa'),
        ],
    },
    'café, crème, déjà, straße, 🙂 (é is two bytes, the emoji four)': {
        'reference': [
            (b'\xc3', b'\xa9'), (b'\xf0', b'\x9f'), (b'\xf0\x9f', b'\x99'), (b'\xf0\x9f\x99', b'\x82'),
            (b' ', b'\xf0\x9f\x99\x82'), (b'\xc3\xa9', b't'), (b'\xc3\xa9t', b'\xc3\xa9'),
            (b'\xc3\xa9', b'j'),
        ],
        'characters_as_symbols': [
            (b' ', b'\xf0\x9f\x99\x82'), (b'\xc3\xa9', b't'), (b'\xc3\xa9t', b'\xc3\xa9'),
            (b'\xc3\xa9', b'j'), (b'\xc3\xa9j', b'\xc3\xa0'), (b'\xc3\xa8', b'm'), (b'\xc3\xa8m', b'e'),
            (b'\xc3\x9f', b'e'),
        ],
        'ties_first_occurrence': [
            (b'\xc3', b'\xa9'), (b' ', b'\xf0'), (b' \xf0', b'\x9f'), (b' \xf0\x9f', b'\x99'),
            (b' \xf0\x9f\x99', b'\x82'), (b'c', b'a'), (b'ca', b'f'), (b'caf', b'\xc3\xa9'),
        ],
    },
    'ab alone, 5 merges asked: 1 is possible': {
        'reference': [
            (b'a', b'b'),
        ],
    },
    '0 merges asked': {
        'reference': [],
    },
    '40 seeded random texts of a, b, é and spaces, 12 merges': {
        'reference': [
            (b'\xc3', b'\xa9'), (b' ', b'a'), (b' ', b'\xc3\xa9'), (b' ', b' '), (b'b', b'a'), (b' ', b'b'),
            (b'\xc3\xa9', b'\xc3\xa9'), (b'b', b'b'), (b' a', b'a'), (b'a', b'\xc3\xa9'), (b'a', b'ba'),
            (b' \xc3\xa9', b'b'),
        ],
        'across_pretokens': [
            (b'\xc3', b'\xa9'), (b' ', b' '), (b' ', b'a'), (b'b', b'a'), (b'  ', b'\xc3\xa9'),
            (b' ', b'\xc3\xa9'), (b'b', b' '), (b'  ', b'a'), (b'\xc3\xa9', b'\xc3\xa9'),
            (b'b', b'\xc3\xa9'), (b'b', b'b'), (b'b', b' a'),
        ],
        'characters_as_symbols': [
            (b' ', b'a'), (b' ', b'\xc3\xa9'), (b' ', b' '), (b'b', b'a'), (b' ', b'b'),
            (b'\xc3\xa9', b'\xc3\xa9'), (b'b', b'b'), (b' a', b'a'), (b'a', b'\xc3\xa9'), (b'a', b'ba'),
            (b' \xc3\xa9', b'b'), (b' b', b'\xc3\xa9'),
        ],
        'ties_first_occurrence': [
            (b'\xc3', b'\xa9'), (b' ', b'a'), (b' ', b'\xc3\xa9'), (b' ', b' '), (b'b', b'a'), (b' ', b'b'),
            (b' a', b'a'), (b'b', b'b'), (b'\xc3\xa9', b'\xc3\xa9'), (b' ', b'ba'), (b'a', b'ba'),
            (b' b', b'\xc3\xa9'),
        ],
    },
    'the first 200 English training sentences, 30 merges': {
        'reference': [
            (b'h', b'e'), (b't', b'he'), (b' ', b'b'), (b's', b'e'), (b'r', b'e'), (b'a', b't'),
            (b' ', b'c'), (b' ', b'the'), (b' ', b'a'), (b' ', b'w'), (b'o', b'u'), (b'k', b'e'),
            (b'a', b'ke'), (b'g', b're'), (b' b', b'i'), (b' ', b'gre'), (b' ', b'f'), (b't', b'ake'),
            (b'e', b'at'), (b' ', b'take'), (b' ', b'm'), (b' ', b's'), (b'se', b'e'), (b' ', b'see'),
            (b'l', b'a'), (b'la', b'c'), (b'lac', b'k'), (b' b', b'lack'), (b' ', b'h'), (b'r', b'se'),
        ],
        'across_pretokens': [
            (b'e', b' '), (b'h', b'e '), (b't', b'he '), (b's', b' '), (b'r', b'e'), (b's', b'e'),
            (b'a', b't'), (b'a', b' '), (b'o', b'u'), (b'a', b'k'), (b'b', b'i'), (b'd', b' '),
            (b'g', b're'), (b'y', b' '), (b'e', b's '), (b't', b'ak'), (b'e', b'at'), (b'c', b'h'),
            (b'l', b'a'), (b'la', b'c'), (b'lac', b'k'), (b'lack', b' '), (b'b', b'lack '), (b'o', b'r'),
            (b'h', b'or'), (b'i', b'n'), (b'f', b'in'), (b'bi', b'r'), (b'o', b'w'), (b'g', b' '),
        ],
        'ties_first_occurrence': [
            (b'h', b'e'), (b't', b'he'), (b' ', b'b'), (b's', b'e'), (b'r', b'e'), (b'a', b't'),
            (b' ', b'c'), (b' ', b'the'), (b' ', b'a'), (b' ', b'w'), (b'o', b'u'), (b'a', b'k'),
            (b'ak', b'e'), (b'g', b're'), (b' b', b'i'), (b' ', b'gre'), (b' ', b'f'), (b'e', b'at'),
            (b' ', b't'), (b' t', b'ake'), (b' ', b'm'), (b' ', b's'), (b' ', b'se'), (b' se', b'e'),
            (b' ', b'h'), (b' b', b'l'), (b' bl', b'a'), (b' bla', b'c'), (b' blac', b'k'), (b'o', b'r'),
        ],
    },
}
