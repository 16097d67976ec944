"""byte_bpe_train: right answers written differently (pair counts kept up to date incrementally, a full
recount of every pre-token occurrence with sorted), and planted bugs, each a learner's way of making one
known mistake."""

from collections import Counter, defaultdict

import regex

from course.visible.s10_9.byte_bpe_train import ACROSS, CHARACTERS, FIRST_TIE, GPT2_PATTERN, RIGHT_TO_LEFT
from tests.answers import bug, right
from tests.answers.s10_9.bpe_train import merged as left_to_right

EXERCISE = "byte_bpe_train"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = "plain Python: texts, bytes and merges, no tensor"


def pretokenize(text):
    """The notebook's given pre-tokenizer, as a learner's namespace holds it (the checks' own copy is
    course code, which answers may not call)."""
    return regex.findall(GPT2_PATTERN, text)


def merged(symbols, a, b, from_right=False):
    """``symbols`` with (a, b) joined, left to right as 10.9's answers do (``from_right``: the mistake)."""
    if not from_right:
        return left_to_right(symbols, a, b)
    out, i = [], len(symbols) - 1
    while i >= 0:
        if i >= 1 and symbols[i - 1] == a and symbols[i] == b:
            out.insert(0, a + b)
            i -= 2
        else:
            out.insert(0, symbols[i])
            i -= 1
    return out


def incremental(texts, num_merges):
    """A right answer: the pair counts kept up to date, each merge touching only the pre-tokens that held
    its pair (where[pair]), by the difference of their pairs before and after."""
    freq = Counter(p for t in texts for p in pretokenize(t))
    pieces = [[bytes([b]) for b in p.encode("utf-8")] for p in freq]
    weight = list(freq.values())
    counts, where = Counter(), defaultdict(set)
    for k, syms in enumerate(pieces):
        for pair in zip(syms, syms[1:]):
            counts[pair] += weight[k]
            where[pair].add(k)
    merges = []
    while len(merges) < num_merges and +counts:
        live = +counts  # the pairs still present (a count of 0 dropped)
        best = max(live, key=lambda p: (live[p], p))
        merges.append(best)
        for k in where.pop(best):
            before = Counter(zip(pieces[k], pieces[k][1:]))
            pieces[k] = merged(pieces[k], *best)
            after = Counter(zip(pieces[k], pieces[k][1:]))
            counts.update({pair: n * weight[k] for pair, n in (after - before).items()})
            counts.subtract({pair: n * weight[k] for pair, n in (before - after).items()})
            for pair in after:
                where[pair].add(k)
    return merges


def recount_sorted(texts, num_merges):
    """A right answer: every pre-token occurrence kept (no counting of repeats), the pairs counted again
    each round and sorted by (count, pair)."""
    pieces = [[piece.encode()[i:i + 1] for i in range(len(piece.encode()))]
              for t in texts for piece in pretokenize(t)]
    merges = []
    for _ in range(num_merges):
        counts = {}
        for syms in pieces:
            for i in range(len(syms) - 1):
                counts[(syms[i], syms[i + 1])] = counts.get((syms[i], syms[i + 1]), 0) + 1
        if not counts:
            break
        best = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))[-1][0]
        merges.append(best)
        pieces = [merged(syms, *best) for syms in pieces]
    return merges


def counting(texts, num_merges, *, whole_text=False, characters=False, first=False, from_right=False,
             as_str=False):
    """The solution's loop with one learner's mistake switched on."""
    split = (lambda t: [t]) if whole_text else pretokenize
    freq = Counter(p for t in texts for p in split(t))
    start = (lambda p: tuple(c.encode() for c in p)) if characters else (
        lambda p: tuple(bytes([b]) for b in p.encode()))
    vocab = {start(p): n for p, n in freq.items()}
    merges = []
    for _ in range(num_merges):
        counts = Counter()
        for syms, n in vocab.items():
            for pair in zip(syms, syms[1:]):
                counts[pair] += n
        if not counts:
            break
        best = counts.most_common(1)[0][0] if first else max(counts, key=lambda p: (counts[p], p))
        merges.append((best[0].decode("latin-1"), best[1].decode("latin-1")) if as_str else best)
        vocab = {tuple(merged(list(s), *best, from_right=from_right)): n for s, n in vocab.items()}
    return merges


def sorts_texts(texts, num_merges):
    texts.sort()
    return counting(texts, num_merges)


def answers(solution):
    return [
        right("solution", solution["byte_bpe_train"]),
        right("incremental pair counts", incremental),
        right("full recount, sorted", recount_sorted),
        bug("pairs counted across pre-tokens", lambda t, k: counting(t, k, whole_text=True),
            hidden=r"counted across pre-tokens", mistake=ACROSS),
        bug("characters as symbols", lambda t, k: counting(t, k, characters=True),
            hidden=r"characters taken as symbols", mistake=CHARACTERS),
        bug("ties by first occurrence (most_common)", lambda t, k: counting(t, k, first=True),
            hidden=r"broken by first occurrence", mistake=FIRST_TIE),
        bug("merges from the right", lambda t, k: counting(t, k, from_right=True),
            hidden=r"applied from the right", mistake=RIGHT_TO_LEFT),
        bug("merges as str", lambda t, k: counting(t, k, as_str=True),
            hidden=r"each a bytes object"),
        bug("texts sorted in place", sorts_texts, hidden=r"changed the list of texts"),
    ]
