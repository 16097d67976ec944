"""Measuring 10.7's language models: per-position scores, count baselines, tables.

Typical use::

    held_out = unseen_sentences(load_sentences("test"), train)      # test sentences not in train
    scores = {"uniform": CountLM.uniform(vocab).score(held_out, vocab),
              "bigram": CountLM.bigram(train, vocab).score(held_out, vocab),
              "GPT": score_model(gpt, held_out, vocab, lm_loss)}
    print(perplexity_table(scores, SHORT_FLOOR))

A score keeps, for every target position, the summed -log p (nats) and the number of tokens,
so the same score gives the perplexity of a whole set or of some positions only (the
positions beyond the longest training sentence, for instance).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import FuncFormatter
from torch import nn

from course.checking.outputs import single_thread
from course.floor import Floor
from course.translation import EOS, PAD, Vocab, pad_batch

LossFn = Callable[..., torch.Tensor]  # lm_loss(logits, targets, pad_id, label_smoothing)


@dataclass(frozen=True)
class Score:
    """Per target position t (position 0 predicts the first word from <bos>): the summed
    -log p in nats of the tokens predicted there (words and <eos>), and their number."""

    nll: tuple[float, ...]
    count: tuple[int, ...]

    def nats_per_token(self, start: int = 0, stop: int | None = None) -> float:
        """The mean -log p per token over positions ``start`` to ``stop`` (excluded)."""
        tokens = sum(self.count[start:stop])
        if not tokens:
            raise ValueError(f"no tokens at positions {start} to {stop}: the longest target position is "
                             f"{len(self.count) - 1}")
        return math.fsum(self.nll[start:stop]) / tokens

    def bits_per_token(self, start: int = 0, stop: int | None = None) -> float:
        return self.nats_per_token(start, stop) / math.log(2)

    def perplexity(self, start: int = 0, stop: int | None = None) -> float:
        return math.exp(self.nats_per_token(start, stop))

    def tokens(self, start: int = 0, stop: int | None = None) -> int:
        return sum(self.count[start:stop])


class _Tally:
    """Sums of -log p and counts per position, grown as positions appear."""

    def __init__(self) -> None:
        self.nll: list[float] = []
        self.count: list[int] = []

    def add(self, position: int, nll: float, count: int) -> None:
        while len(self.nll) <= position:
            self.nll.append(0.0)
            self.count.append(0)
        self.nll[position] += nll
        self.count[position] += count

    def score(self) -> Score:
        return Score(tuple(self.nll), tuple(self.count))


def unseen_sentences(sentences: Sequence[str], seen: Iterable[str]) -> list[str]:
    """``sentences`` without those that also occur in ``seen`` (for instance the training set),
    in their order: a held-out set the model has not read."""
    seen = set(seen)
    return [s for s in sentences if s not in seen]


def positions_seen(sentences: Iterable[str]) -> int:
    """How many input positions the longest sentence fills (<bos> and its words): target
    positions from this one on are longer than anything in ``sentences``."""
    return 1 + max(len(s.split()) for s in sentences)


#: What :func:`score_model` can count: every predicted token, the words only, or <eos> only.
TARGETS = ("all", "words", "<eos>")


@torch.no_grad()
def score_model(model: nn.Module, sentences: Sequence[str], vocab: Vocab, loss_fn: LossFn,
                batch_size: int = 200, window: int | None = None, targets: str = "all") -> Score:
    """Score a model (ids (B, n) -> logits (B, n, V)) on ``sentences``, position by position,
    with ``loss_fn(logits, targets, PAD, 0.0)`` (a mean: times its count).

    ``window``: the most tokens the model can read (a GPT's ``max_len``). A target further
    on is predicted from the last ``window`` tokens only (the sentence's start falls out),
    one forward pass per such position. None: the model reads every sentence whole.

    ``targets``: which predicted tokens count: "all", "words" (every token but <eos>) or
    "<eos>" (the end of each sentence only); the others are handed to ``loss_fn`` as PAD.
    """
    if targets not in TARGETS:
        raise ValueError(f"targets must be one of {', '.join(map(repr, TARGETS))}, not {targets!r}")
    device = next(model.parameters()).device
    tally, was_training = _Tally(), model.training
    model.eval()
    with single_thread():
        for start in range(0, len(sentences), batch_size):
            batch = sentences[start:start + batch_size]
            ids = pad_batch([vocab.encode(s) for s in batch]).to(device)  # (B, n)
            inputs, predicted = ids[:, :-1], ids[:, 1:]  # (B, n - 1) each
            if targets != "all":  # the tokens that do not count become padding
                left_out = predicted == EOS if targets == "words" else predicted != EOS
                predicted = predicted.masked_fill(left_out, PAD)
            whole = inputs.shape[1] if window is None else min(window, inputs.shape[1])
            logits = model(inputs[:, :whole])  # (B, whole, V)
            for t in range(inputs.shape[1]):
                rows = predicted[:, t] != PAD  # (B,): the sentences that have a counted token here
                kept = int(rows.sum())
                if not kept:
                    continue
                if t < whole:
                    here = logits[rows, t:t + 1]  # (kept, 1, V)
                else:  # beyond the window: read the last `window` tokens only
                    here = model(inputs[rows, t + 1 - window:t + 1])[:, -1:]  # (kept, 1, V)
                tally.add(t, loss_fn(here, predicted[rows, t:t + 1], PAD, 0.0).item() * kept, kept)
    model.train(was_training)
    return tally.score()


@dataclass(frozen=True)
class Stops:
    """Where a sentence goes on with a word at one target position: how many sentences do, the mean
    probability a model gives <eos> there, and in how many <eos> is its most likely token (greedy
    decoding would end the sentence there)."""

    sentences: int
    mean_eos_probability: float
    eos_first: int


@torch.no_grad()
def stops_where_words_go_on(model: nn.Module, sentences: Sequence[str], vocab: Vocab, position: int,
                            window: int | None = None) -> Stops:
    """How much a model wants to stop at target ``position`` (0: the first word) of the sentences
    whose token there is a word, not <eos>; reading at most the last ``window`` tokens."""
    going_on = [s for s in sentences if len(s.split()) > position]
    if not going_on:
        raise ValueError(f"no sentence has a word at target position {position}")
    device, was_training = next(model.parameters()).device, model.training
    model.eval()
    ids = pad_batch([vocab.encode(s) for s in going_on]).to(device)  # (B, n)
    start = 0 if window is None else max(0, position + 1 - window)
    with single_thread():
        logits = model(ids[:, start:position + 1])[:, -1]  # (B, V): the next token's
    probs = torch.softmax(logits.double(), dim=-1)
    model.train(was_training)
    return Stops(len(going_on), probs[:, EOS].mean().item(), int((probs.argmax(dim=-1) == EOS).sum()))


class CountLM:
    """A count-based baseline: the next token's probabilities depend on the previous token
    at most. ``probs[a, b]`` is P(next = b | previous = a), float64, each row summing to 1."""

    def __init__(self, probs: torch.Tensor) -> None:
        self.probs = probs  # (V, V)

    @classmethod
    def uniform(cls, vocab: Vocab) -> CountLM:
        """Every token of the vocabulary (specials included) equally likely: perplexity V, what a
        model with the same logit for every token gets."""
        V = len(vocab)
        return cls(torch.full((V, V), 1 / V, dtype=torch.float64))

    @classmethod
    def unigram(cls, train: Sequence[str], vocab: Vocab) -> CountLM:
        """Each token with its frequency among the predicted tokens (words and <eos>) of ``train``,
        whatever came before (maximum likelihood: a token never seen there gets 0)."""
        counts = _pairs(train, vocab).sum(dim=0)  # (V,)
        return cls((counts / counts.sum()).expand(len(vocab), -1).clone())

    @classmethod
    def bigram(cls, train: Sequence[str], vocab: Vocab, weight: float = 0.99) -> CountLM:
        """P(b | a) = weight * count(a b) / count(a) + (1 - weight) * unigram(b): the bigram
        frequency interpolated with the unigram one (Jelinek-Mercer smoothing), so a pair never
        seen in ``train`` keeps some probability. A token never followed by anything in
        ``train`` (<eos>, the specials) gets the unigram."""
        if not 0 <= weight < 1:
            raise ValueError(f"weight must be in [0, 1) so unseen pairs keep some probability, not {weight}")
        pairs = _pairs(train, vocab)  # (V, V): count(a b)
        unigram = pairs.sum(dim=0) / pairs.sum()  # (V,)
        following = pairs.sum(dim=1, keepdim=True)  # (V, 1): count(a) as a previous token
        bigram = pairs / following.clamp(min=1)  # (V, V): rows of unseen a are 0
        mixed = weight * bigram + (1 - weight) * unigram
        return cls(torch.where(following > 0, mixed, unigram))

    def score(self, sentences: Sequence[str], vocab: Vocab) -> Score:
        """The score of this baseline on ``sentences``, position by position (exact, float64)."""
        tally, probs = _Tally(), self.probs.tolist()  # (V, V) as lists: fast to index one by one
        for sentence in sentences:
            ids = vocab.encode(sentence)
            for t, (a, b) in enumerate(zip(ids, ids[1:])):
                p = probs[a][b]
                if p == 0:
                    raise ValueError(f"{vocab.itos[b]!r} after {vocab.itos[a]!r} has probability 0 (never "
                                     f"seen in training): the perplexity would be infinite")
                tally.add(t, -math.log(p), 1)
        return tally.score()


def _pairs(sentences: Sequence[str], vocab: Vocab) -> torch.Tensor:
    """(V, V) float64: how often token b follows token a in ``sentences`` (<bos> .. <eos>)."""
    V = len(vocab)
    counts = torch.zeros(V * V, dtype=torch.float64)
    ids = [vocab.encode(s) for s in sentences]
    flat = torch.tensor([a * V + b for seq in ids for a, b in zip(seq, seq[1:])], dtype=torch.long)
    counts.index_add_(0, flat, torch.ones(len(flat), dtype=torch.float64))
    return counts.view(V, V)


def best_bigram_weight(train: Sequence[str], valid: Sequence[str], vocab: Vocab,
                       weights: Sequence[float] = (0.5, 0.9, 0.99, 0.995, 0.998, 0.999, 0.9995)) -> float:
    """The interpolation weight of :meth:`CountLM.bigram` with the lowest perplexity on ``valid``."""
    return min(weights, key=lambda w: CountLM.bigram(train, vocab, w).score(valid, vocab).nats_per_token())


def perplexity_table(scores: Mapping[str, Score], floor: Floor | None = None) -> str:
    """One line per score: perplexity, bits per token and, given the data's floor, how many bits
    per token above it; the floor itself last."""
    lines = [f"{'':<16}{'perplexity':>11}{'bits/token':>12}" + (f"{'above floor':>13}" if floor else "")]
    for name, score in scores.items():
        line = f"{name:<16}{score.perplexity():>11.3f}{score.bits_per_token():>12.3f}"
        lines.append(line + (f"{score.bits_per_token() - floor.bits_per_token:>+13.3f}" if floor else ""))
    if floor:
        lines.append(f"{'floor (entropy)':<16}{floor.perplexity:>11.3f}{floor.bits_per_token:>12.3f}"
                     f"{0:>+13.3f}")
    return "\n".join(lines)


def length_table(scores: Mapping[str, Score], seen: int) -> str:
    """One line per score: the perplexity at the target positions shorter than ``seen`` (lengths
    met in training) and from ``seen`` on (longer than any training sentence), and overall."""
    lines = [f"{'':<16}{f'positions < {seen}':>16}{f'positions >= {seen}':>17}{'all':>9}"]
    for name, score in scores.items():
        beyond = score.perplexity(seen) if score.tokens(seen) else float("nan")
        lines.append(f"{name:<16}{score.perplexity(0, seen):>16.3f}{beyond:>17.3f}{score.perplexity():>9.3f}")
    tokens = next(iter(scores.values()))
    lines.append(f"{'(tokens)':<16}{tokens.tokens(0, seen):>16}{tokens.tokens(seen):>17}{tokens.tokens():>9}")
    return "\n".join(lines)


def position_table(scores: Mapping[str, Score]) -> str:
    """One line per score: the perplexity at each target position (0: the first word), "-" where
    it has no token; last, the number of tokens at each position of the first score."""
    width = max(len(score.count) for score in scores.values())
    first_name, first = next(iter(scores.items()))
    label = f"(tokens: {first_name})"
    name_width = max(16, len(label) + 2, *(len(name) + 2 for name in scores))
    lines = [f"{'position':<{name_width}}" + "".join(f"{t:>8}" for t in range(width))]
    for name, score in scores.items():
        cells = [f"{score.perplexity(t, t + 1):>8.2f}" if t < len(score.count) and score.count[t]
                 else f"{'-':>8}"
                 for t in range(width)]
        lines.append(f"{name:<{name_width}}" + "".join(cells))
    lines.append(f"{label:<{name_width}}" + "".join(f"{first.count[t] if t < len(first.count) else 0:>8}"
                                                   for t in range(width)))
    return "\n".join(lines)


def perplexity_by_position(scores: Mapping[str, Score], seen: int, *, title: str = "", ax=None):
    """The perplexity at each target position, one line per score (log scale), and a dashed line
    where the positions longer than any training sentence begin (``seen``). Returns the axes."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for name, score in scores.items():
        positions = [t for t, n in enumerate(score.count) if n]
        ax.plot(positions, [score.perplexity(t, t + 1) for t in positions], "o-", markersize=3, label=name)
    ax.axvline(seen - 0.5, color="gray", linestyle="--", label=f"longer than training (from {seen})")
    ax.set(yscale="log", xlabel="target position (0: the first word)", ylabel="perplexity", title=title)
    plain_log_ticks(ax)
    ax.legend(fontsize=8)
    return ax


def plain_log_ticks(ax) -> None:
    """Label a log-scale y axis with plain numbers (2, 3, 4 rather than 2×10⁰)."""
    for axis_formatter in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
        axis_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
