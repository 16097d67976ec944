"""byte_bpe_encode: right answers written differently (the lowest-ranked pair first, as GPT-2's encoder
does; the merges as a list spliced in place), and planted bugs, each a learner's way of making one known
mistake."""

from course.visible.s10_9.byte_bpe_encode import ENCODE_ACROSS
from course.visible.s10_9.byte_bpe_train import CHARACTERS, RIGHT_TO_LEFT
from tests.answers import bug, right
from tests.answers.s10_9.byte_bpe_train import pretokenize

EXERCISE = "byte_bpe_encode"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = "plain Python: texts, bytes and merges, no tensor"


def lowest_rank_first(text, merges):
    """A right answer: in each pre-token, again and again, merge the present pair learned first."""
    rank = {tuple(m): r for r, m in enumerate(merges)}
    tokens = []
    for piece in pretokenize(text):
        symbols = [bytes([b]) for b in piece.encode("utf-8")]
        while len(symbols) > 1:
            ranks = [rank.get(pair, len(rank)) for pair in zip(symbols, symbols[1:])]
            best = ranks.index(min(ranks))
            pair = (symbols[best], symbols[best + 1])
            if pair not in rank:
                break
            out, i = [], 0
            while i < len(symbols):
                if symbols[i:i + 2] == list(pair):
                    out.append(pair[0] + pair[1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            symbols = out
        tokens += symbols
    return tokens


def encoding(text, merges, *, whole_text=False, characters=False, from_right=False, overlapping=False,
             reverse=False):
    """The solution's loop, spliced in place, with one learner's mistake switched on."""
    tokens = []
    for piece in ([text] if whole_text else pretokenize(text)):
        symbols = [c.encode() for c in piece] if characters else [bytes([b]) for b in piece.encode()]
        for a, b in (reversed(merges) if reverse else merges):
            positions = range(len(symbols) - 2, -1, -1) if from_right else None
            if from_right:
                for i in positions:
                    if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
                        symbols[i:i + 2] = [a + b]
                continue
            i = 0
            while i < len(symbols) - 1:
                if symbols[i] == a and symbols[i + 1] == b:
                    if overlapping and i + 2 < len(symbols) and symbols[i + 2] == b and a == b:
                        symbols[i:i + 3] = [a + b, a + b]  # a a a -> aa aa: the middle a used twice
                    else:
                        symbols[i:i + 2] = [a + b]
                i += 1
        tokens.extend(symbols)
    return tokens


def reverses_merges(text, merges):
    merges.reverse()
    return encoding(text, list(reversed(merges)))


def answers(solution):
    return [
        right("solution", solution["byte_bpe_encode"]),
        right("lowest-ranked pair first", lowest_rank_first),
        right("spliced in place", encoding),
        bug("the whole text as one sequence", lambda t, m: encoding(t, m, whole_text=True),
            hidden=r"one sequence of bytes", mistake=ENCODE_ACROSS),
        bug("characters as symbols", lambda t, m: encoding(t, m, characters=True),
            hidden=r"characters taken as symbols", mistake=CHARACTERS),
        bug("merges from the right", lambda t, m: encoding(t, m, from_right=True),
            hidden=r"applied from the right", mistake=RIGHT_TO_LEFT),
        bug("overlapping merge: a a a -> aa aa", lambda t, m: encoding(t, m, overlapping=True),
            hidden=r"every byte once"),
        bug("merges in reverse order", lambda t, m: encoding(t, m, reverse=True),
            hidden=r"in the order they were learned"),
        bug("a str", lambda t, m: b"".join(encoding(t, m)).decode(),
            hidden=r"should return a list of bytes"),
        bug("merges reversed in place", reverses_merges, hidden=r"changed the list of merges"),
    ]
