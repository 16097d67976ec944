"""bpe_train: right answers written differently (pair counts kept up to date incrementally, a full
recount with sorted), and planted bugs, each a learner's way of making one known mistake."""

from collections import Counter, defaultdict

from course.visible.s10_9.bpe_train import EOW_GLUED, NO_EOW, NO_FREQUENCIES, OVERLAP, STALE_COUNTS, TIES
from grader.checks.s10_9.bpe_train import reference_train
from tests.answers import bug, right

EXERCISE = "bpe_train"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'plain Python: words and merges, no tensor'
EOW = "</w>"


def merged(symbols, a, b):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == a and symbols[i + 1] == b:
            out.append(a + b)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def incremental(words, num_merges):
    """A right answer: the pair counts kept in a dictionary and updated, word by word, after each merge
    (only the words that hold the merged pair are recounted)."""
    freq = Counter(words)
    symbols = {w: list(w) + [EOW] for w in freq}
    counts, holders = defaultdict(int), defaultdict(set)
    for w, syms in symbols.items():
        for pair in zip(syms, syms[1:]):
            counts[pair] += freq[w]
            holders[pair].add(w)
    merges = []
    while len(merges) < num_merges:
        live = {p: n for p, n in counts.items() if n > 0}
        if not live:
            break
        best = max(live, key=lambda p: (live[p], p))
        merges.append(best)
        for w in list(holders[best]):
            old = symbols[w]
            for pair in zip(old, old[1:]):
                counts[pair] -= freq[w]
            new = merged(old, *best)
            for pair in zip(new, new[1:]):
                counts[pair] += freq[w]
                holders[pair].add(w)
            symbols[w] = new
        holders[best] = set()
    return merges


def recount_sorted(words, num_merges):
    """A right answer: every word's symbols in a list (repeats kept, no counting of words), the pairs
    counted again each round and sorted by (count, pair)."""
    text = [list(w) + [EOW] for w in words]
    merges = []
    for _ in range(num_merges):
        counts = {}
        for syms in text:
            for i in range(len(syms) - 1):
                counts[(syms[i], syms[i + 1])] = counts.get((syms[i], syms[i + 1]), 0) + 1
        if not counts:
            break
        best = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]))[-1][0]
        merges.append(best)
        text = [merged(syms, *best) for syms in text]
    return merges


def counting(words, num_merges, *, eow=True, distinct=False, overlap=False, stale=False, least=False,
             stop=True, new_symbols=False):
    """The solution's loop with one learner's mistake switched on."""
    freq = Counter(set(words)) if distinct else Counter(words)
    vocab = {tuple(w) + ((EOW,) if eow else ()): n for w, n in freq.items()}

    def pairs_of():
        counts = Counter()
        for syms, n in vocab.items():
            if overlap:  # each pair counted by a scan that jumps past a match: 'a a a' holds one ('a', 'a')
                for pair in set(zip(syms, syms[1:])):
                    i = 0
                    while i < len(syms) - 1:
                        if (syms[i], syms[i + 1]) == pair:
                            counts[pair] += n
                            i += 2
                        else:
                            i += 1
            else:
                for pair in zip(syms, syms[1:]):
                    counts[pair] += n
        return counts

    first = pairs_of()
    merges = []
    for _ in range(num_merges):
        counts = first if stale else pairs_of()
        if not counts and stop:
            break
        if least:
            best = min(counts, key=lambda p: (-counts[p], p))
        else:
            best = max(counts, key=lambda p: (counts[p], p))
        if stale:
            del first[best]
        merges.append(best[0] + best[1] if new_symbols else best)
        vocab = {tuple(merged(list(s), *best)): n for s, n in vocab.items()}
    return merges


def sorts_words(words, num_merges):
    words.sort()
    return counting(words, num_merges)


def answers(solution):
    return [
        right("solution", solution["bpe_train"]),
        bug("merges as lists [a, b]", lambda words, n: [list(m) for m in solution["bpe_train"](words, n)],
            hidden=r"merge 1 is the list \['.*'\].*make each merge a tuple"),
        right("incremental pair counts", incremental),
        right("full recount, sorted", recount_sorted),
        bug("</w> glued to the last letter (subword-nmt's learn_bpe)",
            lambda w, k: [tuple(m) for m in reference_train(w, k, eow="glued")], mistake=EOW_GLUED),
        bug("ties: the least pair", lambda w, k: counting(w, k, least=True),
            hidden=r"broken another way",
            mistake=TIES),
        bug("counts of the first round reused", lambda w, k: counting(w, k, stale=True),
            hidden=r"not updated after each merge", mistake=STALE_COUNTS),
        bug("aaa holds one ('a', 'a')", lambda w, k: counting(w, k, overlap=True),
            hidden=r"overlapping pairs counted once", mistake=OVERLAP),
        bug("no end-of-word marker", lambda w, k: counting(w, k, eow=False),
            hidden=r"without the end-of-word",
            mistake=NO_EOW),
        bug("distinct words", lambda w, k: counting(w, k, distinct=True),
            hidden=r"each distinct word counted",
            mistake=NO_FREQUENCIES),
        bug("no stop when every word is one symbol", lambda w, k: counting(w, k, stop=False),
            hidden=r"raised ValueError"),
        bug("the new symbols returned", lambda w, k: counting(w, k, new_symbols=True),
            hidden=r"a merge is the pair of symbols it joins"),
        bug("words sorted in place", sorts_words,
            hidden=r"changed the list of words"),
    ]
