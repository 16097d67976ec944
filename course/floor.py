"""The floor of the data: the entropy of the English sentences the corpus's grammar generates.

``data/make_corpus.py`` draws every sentence from a small probabilistic grammar, so the
probability of any English sentence is known exactly, and so is the entropy of their
distribution: the lowest cross-entropy (and so perplexity) that any language model can
reach, on average, on fresh sentences of the grammar. ``SHORT_FLOOR`` holds it for the
train/valid/test population (at most 7 French words), ``LONG_FLOOR`` for the ``long`` split
(8 or 9 French words). Both are computed by :func:`grammar_floor`, which needs the grammar
(``data/make_corpus.py``, not shipped to learners); ``tests/test_gpt.py`` recomputes them.

Typical use::

    SHORT_FLOOR.perplexity, SHORT_FLOOR.bits_per_token   # the best possible, per token (words and <eos>)
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Floor:
    """The entropy of a distribution over sentences, per sentence and per predicted token."""

    nats_per_sentence: float
    tokens_per_sentence: float  # expected words + 1 (<eos>): the tokens a model predicts

    @property
    def nats_per_token(self) -> float:
        return self.nats_per_sentence / self.tokens_per_sentence

    @property
    def bits_per_token(self) -> float:
        return self.nats_per_token / math.log(2)

    @property
    def perplexity(self) -> float:
        return math.exp(self.nats_per_token)


#: The grammar's entropy for the sentences of train, valid and test (French 1-7 words);
#: ``grammar_floor(make_corpus, 1, 7)``, recomputed by the tests.
SHORT_FLOOR = Floor(nats_per_sentence=11.612125195800955, tokens_per_sentence=6.028375154536033)
#: The same for the ``long`` split (French 8-9 words): ``grammar_floor(make_corpus, 8, 9)``.
LONG_FLOOR = Floor(nats_per_sentence=13.379822685033826, tokens_per_sentence=8.233668484256315)

Phrase = tuple[str, int, bool]  # (English words, number of French words, third person singular)


def _add(table: dict, key, p: float) -> None:
    table[key] = table.get(key, 0.0) + p


def noun_phrases(g: ModuleType, kinds: tuple[str, ...]) -> dict[Phrase, float]:
    """Every English noun phrase ``g.noun_phrase`` can produce for ``kinds``, with its probability.

    Mirrors ``noun_phrase``: a noun uniformly among those of ``kinds``; plural (not for mass
    nouns) with ``P_PLURAL``; a size adjective (not for mass nouns) with ``P_SIZE_ADJ``, one
    of two; a colour with ``P_COLOUR_ADJ``, one of five; the determiner (definite with
    ``P_DEFINITE``, or partitive with ``P_PARTITIVE`` for mass nouns), all independent.
    """
    nouns = [n for n in g.NOUNS if n.kind in kinds]
    sizes, colours = g.ADJECTIVES[:2], g.ADJECTIVES[2:]
    out: dict[Phrase, float] = {}
    for noun in nouns:
        mass = noun.kind == "mass"
        for plural, p_plural in ((False, 1.0),) if mass else ((False, 1 - g.P_PLURAL), (True, g.P_PLURAL)):
            size_options = [(None, 1.0)] if mass else \
                [(None, 1 - g.P_SIZE_ADJ)] + [(a, g.P_SIZE_ADJ / len(sizes)) for a in sizes]
            colour_options = [(None, 1 - g.P_COLOUR_ADJ)] + \
                [(a, g.P_COLOUR_ADJ / len(colours)) for a in colours]
            p_first = g.P_PARTITIVE if mass else g.P_DEFINITE
            for size, p_size in size_options:
                for colour, p_colour in colour_options:
                    for first, p_det in ((True, p_first), (False, 1 - p_first)):
                        fr, en = g.mass_determiner(noun, first) if mass else \
                            g.count_determiner(noun, plural, first, size is not None)
                        en = en + [a.en for a in (size, colour) if a] + [noun.en_pl if plural else noun.en_sg]
                        n_fr = len(fr) + 1 + (size is not None) + (colour is not None)
                        p = p_plural * p_size * p_colour * p_det / len(nouns)
                        _add(out, (" ".join(g.fix_a_an(en)), n_fr, not plural), p)
    return out


def subjects(g: ModuleType) -> dict[Phrase, float]:
    """Every English subject ``g.subject`` can produce: a pronoun, or an animal noun phrase."""
    out = {k: (1 - g.P_PRONOUN_SUBJECT) * p for k, p in noun_phrases(g, ("animal",)).items()}
    for _, en, person in g.PRONOUNS:
        _add(out, (en, 1, person == 2), g.P_PRONOUN_SUBJECT / len(g.PRONOUNS))
    return out


def _unique(phrases: dict[Phrase, float], what: str) -> None:
    """Fail unless an English phrase fixes its French length and person (the factorisation needs it)."""
    seen: dict[str, Phrase] = {}
    for key in phrases:
        if seen.setdefault(key[0], key) != key:
            raise ValueError(f"the {what} {key[0]!r} comes with two French lengths or persons")


@dataclass(frozen=True)
class _Groups:
    """Sums over the phrases of each French length: of p, p log p and p * (English words)."""

    p: dict[int, float]
    p_log_p: dict[int, float]
    p_words: dict[int, float]

    @classmethod
    def of(cls, phrases: dict[Phrase, float]) -> _Groups:
        sums = [defaultdict(float) for _ in range(3)]
        for (en, n_fr, _), p in phrases.items():
            for table, value in zip(sums, (p, p * math.log(p), p * len(en.split()))):
                table[n_fr] += value
        return cls(*(dict(table) for table in sums))


class GrammarModel:
    """The grammar's English sentences whose French has ``min_words`` to ``max_words`` words
    (both included), as a distribution over whole sentences: ``log_prob`` and ``floor``.

    How: a sentence is subject, verb, object, drawn independently (the object's kinds depend
    on the verb), and its English is ``subject + verb form + object``. The English subject
    fixes the verb's form (he eats, they eat), its French length and person, and no verb form
    occurs in a noun phrase (both checked here), so an English sentence splits back into one
    (subject, verb, object) and its probability is ``P(subject) P(verb) P(object | verb) / Z``,
    ``Z`` the probability of the length range. The entropy ``-sum p log p`` then splits into
    sums over subjects and objects grouped by French length (no sentence is listed); the
    expected tokens (English words + <eos>) likewise. Exact up to float64 rounding. The
    length range is what the corpus selects on; its other steps (distinct French sentences,
    the shuffle into splits) are not modelled: see data/README.md.
    """

    def __init__(self, g: ModuleType, min_words: int, max_words: int) -> None:
        self.subjects = subjects(g)
        _unique(self.subjects, "subject")
        self.objects = {verb.objects: noun_phrases(g, verb.objects) for verb in g.VERBS}
        for phrases in self.objects.values():
            _unique(phrases, "object")
        self.verbs = {w: (verb, w == verb.en_3sg) for verb in g.VERBS for w in (verb.en, verb.en_3sg)}
        clash = set(self.verbs) & {w for phrases in (self.subjects, *self.objects.values())
                                   for en, _, _ in phrases for w in en.split()}
        if clash:
            raise ValueError(f"verb forms {sorted(clash)} occur in noun phrases: sentences would not split")
        self.all_verbs, self.range = list(g.VERBS), (min_words, max_words)
        self._by_english = {kinds: {k[0]: (k, p) for k, p in phrases.items()}  # English -> (phrase, p)
                            for kinds, phrases in ((None, self.subjects), *self.objects.items())}
        self.z, self._p_log_p, self._p_words = self._sums()

    def _sums(self) -> tuple[float, float, float]:
        """Over the sentences in range, sum q, q log q and q * (English words): q unconditioned."""
        terms: list[list[float]] = [[], [], []]
        s, p_verb = _Groups.of(self.subjects), 1 / len(self.all_verbs)
        for verb in self.all_verbs:
            o = _Groups.of(self.objects[verb.objects])
            for ls in s.p:
                for lo in o.p:
                    if self.range[0] <= ls + 1 + lo <= self.range[1]:
                        both = s.p[ls] * o.p[lo]
                        terms[0].append(p_verb * both)
                        terms[1].append(p_verb * (s.p_log_p[ls] * o.p[lo] + s.p[ls] * o.p_log_p[lo]
                                                  + both * math.log(p_verb)))
                        terms[2].append(p_verb * (s.p_words[ls] * o.p[lo] + s.p[ls] * o.p_words[lo]
                                                  + both))  # + both: the verb is one word
        return tuple(math.fsum(t) for t in terms)

    @property
    def floor(self) -> Floor:
        """The entropy of the sentences in range: p = q / Z, so -sum p log p = -(sum q log q) / Z + log Z."""
        return Floor(nats_per_sentence=-self._p_log_p / self.z + math.log(self.z),
                     tokens_per_sentence=self._p_words / self.z + 1)

    def log_prob(self, sentence: str) -> float:
        """The natural log of the probability of an English sentence (-inf if the grammar,
        within the length range, cannot produce it)."""
        words = sentence.split()
        at = [i for i, w in enumerate(words) if w in self.verbs]
        if len(at) != 1:
            return -math.inf
        verb, third_singular = self.verbs[words[at[0]]]
        subject = self._by_english[None].get(" ".join(words[:at[0]]))
        obj = self._by_english[verb.objects].get(" ".join(words[at[0] + 1:]))
        if subject is None or obj is None or subject[0][2] != third_singular:
            return -math.inf
        if not self.range[0] <= subject[0][1] + 1 + obj[0][1] <= self.range[1]:
            return -math.inf
        return math.log(subject[1]) + math.log(obj[1]) - math.log(len(self.all_verbs)) - math.log(self.z)


def grammar_floor(g: ModuleType, min_words: int, max_words: int) -> Floor:
    """The entropy of grammar ``g``'s English sentences whose French has ``min_words`` to
    ``max_words`` words: see :class:`GrammarModel`."""
    return GrammarModel(g, min_words, max_words).floor
