"""Visible check of ``beam_search`` on scripted tables whose best hypotheses are known; its known
mistakes and the messages both sides give."""

from __future__ import annotations

import math

import torch
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    check_unplaced_tensors,
    close_score,
    passed,
    visible_check,
)
from course.checking.standins import expect_token_ids
from course.translation import BOS, EOS, PAD

NAME = "beam_search"
RULE = ("At each step extend every unfinished hypothesis by every token, keep the beam_size best extensions, "
        "and move those that end in eos_id to the finished set: fewer than beam_size may stay unfinished, "
        "and the next step again keeps the beam_size best extensions of those.")
# The first whose ids match is named: the more specific ones first.
FINISHED_COMPETE = Mistake("finished_compete", "finished hypotheses kept in the beam, taking slots from the "
                           "unfinished ones", RULE)
LENGTH_NORM = Mistake("length_norm", "hypotheses ranked by their mean log-probability per token (a length "
                      "penalty)", "The contract ranks by the sum of the log-probabilities, with no "
                                  "length penalty.")
NO_REFILL = Mistake("no_refill", "a beam that shrinks by one for every finished hypothesis", RULE)
DROP_FINISHED = Mistake("drop_finished", "finished hypotheses thrown away",
                        "Keep every hypothesis that ends in eos_id in a finished set, and return the "
                        "best of the "
                        "finished and the unfinished ones.")
NEW_TOKENS = Mistake("new_tokens", "max_len counted without <bos>",
                     "Hypotheses stop at max_len tokens, bos_id included, as in greedy_decode.")
RAW_LOGITS = Mistake("raw_logits", "hypotheses scored with the raw logits",
                     "Logits are not log-probabilities: add torch.log_softmax(logits[:, -1], dim=-1) to each "
                     "hypothesis' score.")
GREEDY = Mistake("greedy", "beam_size ignored: the greedy choice at every step",
                 "Keep the beam_size best extensions of all hypotheses, not one.")
WIDE_BEAM = Mistake("wide_beam", "a beam wider than the extensions there are",
                    "When beam_size is larger than k × vocab, keep them all: "
                    "topk(min(beam_size, total.numel())).")

A, B_, C, D = 3, 4, 5, 6  # words of the scripted tables (pad 0, <bos> 1, <eos> 2)
TABLES = {  # prefix (the words after <bos>) -> next-word probabilities; <eos> after any other prefix
    "greedy misses": {(): {A: 0.5, B_: 0.4, EOS: 0.1}, (A,): {A: 0.4, B_: 0.3, EOS: 0.3},
                      (B_,): {EOS: 0.9, A: 0.05, B_: 0.05}},
    "refill": {(): {A: 0.66, EOS: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, EOS: 0.02},
               (A, B_): {EOS: 0.95, A: 0.05}, (A, C): {EOS: 0.1, A: 0.31, B_: 0.3, C: 0.29}},
    "short wins": {(): {A: 0.55, EOS: 0.45}, (A,): {B_: 0.9, EOS: 0.1}, (A, B_): {C: 0.9, EOS: 0.1},
                   (A, B_, C): {EOS: 0.9, A: 0.1}},
    "kept finished": {(): {A: 0.7, EOS: 0.3}, (A,): {A: 0.51, B_: 0.49}, (A, A): {C: 0.52, D: 0.48},
                      (A, B_): {C: 0.53, D: 0.47}},
}
CASES = [  # name, table, max_len, beam_size, the best hypothesis and its probability, what known
    # mistakes return instead (the course's tests check them against the graded search; a max_len
    # counted without <bos> shows as too many tokens)
    ("beam_size=2 finds <bos> 4 <eos> (0.4 · 0.9 = 0.36), which greedy decoding misses", "greedy misses",
     6, 2, ([BOS, B_, EOS], 0.4 * 0.9),
     {GREEDY: [BOS, A, A, EOS], DROP_FINISHED: [BOS, A, A, PAD, PAD, PAD]}),
    ("beam_size=1 is greedy decoding: <bos> 3 3 <eos> (0.5 · 0.4 = 0.2)", "greedy misses", 6, 1,
     ([BOS, A, A, EOS], 0.5 * 0.4), {}),
    ("max_len=2: <bos> and one word", "greedy misses", 2, 2, ([BOS, A], 0.5), {}),
    ("the beam refills after <eos>: <bos> 3 4 <eos> (0.66 · 0.48 · 0.95) beats <bos> <eos> (0.25)", "refill",
     6, 2, ([BOS, A, B_, EOS], 0.66 * 0.48 * 0.95),
     {GREEDY: [BOS, A, C, A, EOS], NO_REFILL: [BOS, EOS], DROP_FINISHED: [BOS, A, C, A, PAD, PAD]}),
    ("no length penalty: <bos> <eos> (0.45) beats <bos> 3 4 5 <eos> (0.55 · 0.9 · 0.9 · 0.9)", "short wins",
     6, 2, ([BOS, EOS], 0.45), {LENGTH_NORM: [BOS, A, B_, C, EOS]}),
    ("a finished <bos> <eos> (0.3) stays finished while the beam goes on", "kept finished", 6, 2,
     ([BOS, EOS], 0.3), {FINISHED_COMPETE: [BOS, A, A, C, EOS]}),
    ("beam_size=10, more than the 7 extensions of the first step: still <bos> 4 <eos>", "greedy misses",
     6, 10, ([BOS, B_, EOS], 0.4 * 0.9), {}),
]
KNOWN = (FINISHED_COMPETE, LENGTH_NORM, NO_REFILL, DROP_FINISHED, GREEDY)  # the order they are named in
SHIFT = 2.0  # the logits at position j are the log-probabilities plus SHIFT * j: only log-softmax undoes it


def goes_on_after_eos(eos: int, where: str) -> str:
    return (f"{NAME} returned a hypothesis that goes on after eos_id={eos} in {where}: a hypothesis "
            "that ends "
            "in eos_id is finished; it is not extended.")


def not_the_best(where: str, mistake: Mistake | None) -> CheckFailure:
    return CheckFailure(f"{NAME} did not return the best hypothesis of the search in {where}.\n" + (
        mistake.sentence() if mistake else
        f"{RULE} Stop when the best finished score is at least the best unfinished one."), mistake)


def wrong_score(score: float, want: float, where: str, raw_logits: bool = False) -> CheckFailure:
    """The right sentence with the wrong score ``score`` (the log-probability ``want``)."""
    hint = ""
    if math.isclose(score, math.exp(want), rel_tol=1e-4, abs_tol=1e-6):
        hint = " It looks like a probability: return the sum of the log-probabilities instead."
    elif raw_logits:
        hint = f" {RAW_LOGITS.sentence()}"
    return CheckFailure(f"{NAME} found the right sentence but its score is {score:.4g} instead of "
                        f"{want:.4g} in "
                        f"{where}: the score is the sum of the log-probabilities (log-softmax of the "
                        "logits) of "
                        "every token after bos_id." + hint, RAW_LOGITS if raw_logits else None)


def expect_pair(result, where: str):
    if not isinstance(result, tuple) or len(result) != 2:
        raise CheckFailure(f"{NAME} should return a pair (ids, score), but returned {type(result).__name__} "
                           f"in {where}.")
    return result


def expect_score(score, where: str) -> float:
    try:
        return float(score)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailure(f"{NAME}'s score should be a number (a float), but is a {type(score).__name__} "
                           f"in {where}.") from None


class TableModel(nn.Module):
    """A scripted translator for one sentence with the notebook's interface (encode, decode,
    pad_id): the next-word probabilities after a prefix come from a table, shifted logits."""

    def __init__(self, table, vocab: int = 7):
        super().__init__()
        self.table, self.vocab, self.pad_id = table, vocab, PAD

    def encode(self, src, src_mask=None):
        return torch.zeros(*src.shape, 4, device=src.device)  # (B, n_src, 4): a memory it never reads

    def decode(self, tgt, memory, src_mask=None):
        logits = torch.full((*tgt.shape, self.vocab), -30.0, device=tgt.device)  # (k, n, vocab)
        for i, row in enumerate(tgt.tolist()):
            for j in range(len(row)):
                for word, p in self.table.get(tuple(row[1:j + 1]), {EOS: 1.0}).items():
                    logits[i, j, word] = math.log(p) + SHIFT * j
        return logits

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


@visible_check
def check_beam_search(beam_search) -> None:
    """On scripted tables whose best hypotheses are known: the ids and the score (a sum of
    log-probabilities), the finished set, the refill, no length penalty, max_len, beam_size=1."""
    for name, table, max_len, beam_size, (want, probability), known in CASES:
        case = f"case '{name}'"
        src = torch.tensor([[7, 5, 6]])  # (1, n_src): a source the table model never reads
        model = TableModel(TABLES[table])
        try:
            result = call_learner(NAME, case, beam_search, model, src, BOS, EOS, max_len, beam_size=beam_size)
        except CheckFailure as failure:
            if beam_size <= model.vocab or failure.__cause__ is None:
                raise
            raise CheckFailure(f"{failure}\n{WIDE_BEAM.sentence()}", WIDE_BEAM) from failure.__cause__
        ids, score = expect_pair(result, case)
        (ids,) = expect_token_ids(ids, f"{NAME}'s ids", 1, BOS, max_len, case)
        score = expect_score(score, case)
        if EOS in ids[1:-1]:
            raise CheckFailure(goes_on_after_eos(EOS, case))
        if ids != want:
            raise not_the_best(case, next((m for m in KNOWN if known.get(m) == ids), None))
        if not close_score(score, math.log(probability)):
            raw = close_score(score, math.log(probability) + SHIFT * sum(range(len(ids) - 1)))
            raise wrong_score(score, math.log(probability), case, raw)
    model, src = TableModel(TABLES["greedy misses"]), torch.tensor([[7, 5, 6]])  # made outside the probe
    check_unplaced_tensors(NAME, lambda: beam_search(model, src, BOS, EOS, 6, beam_size=2))
    passed("beam_search finds what greedy misses, keeps finished sentences apart, scores log-probabilities.")
