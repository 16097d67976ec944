"""bpe_encode: right answers written differently (the lowest-ranked pair first, as GPT-2's encoder;
the merges through a string), and planted bugs, each a learner's way of making one known mistake."""

from course.visible.s10_9.bpe_encode import FIRST_ONLY, GREEDY, NO_EOW
from tests.answers import bug, right

EXERCISE = "bpe_encode"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'plain Python: words and merges, no tensor'
EOW = "</w>"


def lowest_rank_first(word, merges):
    """A right answer: again and again, merge the present pair that was learned first (GPT-2's loop)."""
    rank = {tuple(m): r for r, m in enumerate(merges)}
    symbols = list(word) + [EOW]
    while len(symbols) > 1:
        pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))]
        best, _ = min(pairs)
        if best == len(rank):
            break
        a, b = merges[best]
        out, i = [], 0
        while i < len(symbols):
            if symbols[i:i + 2] == [a, b]:
                out.append(a + b)
                i += 2
            else:
                out.append(symbols[i])
                i += 1
        symbols = out
    return symbols


def recursive(word, merges):
    """A right answer: the first merge applied to the whole word by recursion, then the rest."""
    def apply(symbols, pair):
        if len(symbols) < 2:
            return symbols
        if (symbols[0], symbols[1]) == pair:
            return (pair[0] + pair[1],) + apply(symbols[2:], pair)
        return symbols[:1] + apply(symbols[1:], pair)

    symbols = tuple(word) + (EOW,)
    for pair in merges:
        symbols = apply(symbols, tuple(pair))
    return list(symbols)


def encoding(word, merges, *, eow=True, first_only=False, reverse=False):
    symbols = list(word) + ([EOW] if eow else [])
    for a, b in (reversed(merges) if reverse else merges):
        i = 0
        while i < len(symbols) - 1:
            if symbols[i] == a and symbols[i + 1] == b:
                symbols[i:i + 2] = [a + b]
                if first_only:
                    break
            i += 1
        # (i += 1 after a merge: the merged symbol is not merged again with this pair)
    return symbols


def greedy_longest(word, merges):
    """The longest known symbol at each position, left to right (WordPiece's way, not BPE's)."""
    known = {a + b for a, b in merges} | set(word) | {EOW}
    text, out, i = word + EOW, [], 0
    while i < len(text):
        j = max(j for j in range(i + 1, len(text) + 1) if text[i:j] in known or j == i + 1
                or text[i:j] == EOW)
        out.append(text[i:j])
        i = j
    return out


def reverses_merges(word, merges):
    merges.reverse()
    return encoding(word, list(reversed(merges)))


def one_letter_as_is(encode):
    """subword-nmt's apply_bpe, as published: a word of one letter comes back as it is, a string."""
    return lambda word, merges: word if len(word) == 1 else encode(word, merges)


def answers(solution):
    return [
        right("solution", solution["bpe_encode"]),
        right("lowest-ranked pair first", lowest_rank_first),
        right("recursive", recursive),
        bug("one letter returned as a string (subword-nmt's)", one_letter_as_is(solution["bpe_encode"]),
            hidden=r"returned the string '.'"),
        bug("greedy longest match", greedy_longest,
            hidden=r"token \d+ is '[^']*' where the contract's is '[^']*'[\s\S]*greedy longest match",
            mistake=GREEDY),
        bug("no end-of-word marker", lambda w, m: encoding(w, m, eow=False),
            hidden=r"without its end-of-word",
            mistake=NO_EOW),
        bug("first occurrence only", lambda w, m: encoding(w, m, first_only=True),
            hidden=r"first occurrence",
            mistake=FIRST_ONLY),
        bug("merges in reverse order", lambda w, m: encoding(w, m, reverse=True),
            hidden=r"in the order they were"),
        bug("a string", lambda w, m: " ".join(encoding(w, m)),
            hidden=r"should return a list of strings"),
        bug("merges reversed in place", reverses_merges,
            hidden=r"changed the list of merges"),
    ]
