"""Hidden check of ``beam_search``: the contract's search (or an exhaustive one) on scripted tables
with seeded logits, and on the notebook's Transformer built by the check."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from course.checking import close_score
from course.checking.standins import expect_token_ids
from course.visible.s10_8.beam_search import (
    DROP_FINISHED,
    FINISHED_COMPETE,
    GREEDY,
    LENGTH_NORM,
    NAME,
    NEW_TOKENS,
    NO_REFILL,
    RAW_LOGITS,
    expect_pair,
    expect_score,
    goes_on_after_eos,
    not_the_best,
    wrong_score,
)
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, CheckFailure, Outputs, call_learner, generator
from grader.checks.s10_8.models import decoding_model, decoding_source, source_mask


class TableModel(nn.Module):
    """A scripted translator with the notebook's interface, for one sentence: the logits after
    a prefix (the tokens after <bos>) come from ``table``, or are drawn from the prefix itself.

    ``table`` maps a prefix (a tuple) to {token: probability}; the mass left over is spread
    over the other tokens. Prefixes not in the table get seeded random logits (``spread``
    wide). Every prefix's logits are shifted by a seeded constant: only log-softmax gives
    log-probabilities, raw logits do not.
    """

    def __init__(self, vocab: int, seed: int, table: Mapping | None = None, spread: float = 1.0,
                 damp: Mapping[int, float] | None = None, pad_id: int = 0):
        super().__init__()
        self.vocab, self.seed, self.table, self.spread = vocab, seed, dict(table or {}), spread
        self.damp = dict(damp or {})  # token -> logit added to the random logits (make it unlikely)
        self.pad_id = pad_id
        self.anchor = nn.Parameter(torch.zeros(1, dtype=torch.float64))  # the model's device

    def logits_for(self, prefix: tuple[int, ...]) -> torch.Tensor:
        """float64 logits (vocab,) for the next token after <bos> + prefix."""
        key = self.seed
        for token in prefix:
            key = (key * 1_000_003 + token + 1) % 2**61
        g = generator(key)
        shift = float(torch.rand((), generator=g, dtype=torch.float64)) * 6 - 3
        # Every tensor placed on the CPU by name: check_unplaced_tensors moves a learner's
        # unplaced tensors to 'meta', and must not move the model's own.
        if prefix in self.table:
            given = self.table[prefix]
            rest = (1.0 - sum(given.values())) / max(1, self.vocab - len(given))
            probs = torch.tensor([given.get(w, rest * (1 + w / 100)) for w in range(self.vocab)],
                                 dtype=torch.float64, device="cpu")  # the rest a little uneven: no ties
            return probs.clamp_min(1e-12).log() + shift
        logits = torch.randn(self.vocab, generator=g, dtype=torch.float64, device="cpu") * self.spread + shift
        for token, amount in self.damp.items():
            logits[token] += amount
        return logits

    def encode(self, src, src_mask=None):
        return src[:, :, None].to(self.anchor.dtype).expand(-1, -1, 4)  # (B, n_src, 4), unused

    def decode(self, tgt, memory, src_mask=None):
        k, n = tgt.shape
        logits = torch.empty(k, n, self.vocab, dtype=torch.float64, device="cpu")
        for i, row in enumerate(tgt.tolist()):
            for j in range(n):
                logits[i, j] = self.logits_for(tuple(row[1: j + 1]))
        return logits.to(self.anchor.device)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


BEAM_SWITCHES = {
    "width": None,  # 1: beam_size ignored (greedy)
    "raw_logits": False,  # scores summed from raw logits instead of log-softmax
    "finished_compete": False,  # finished hypotheses stay in the beam and take slots
    "no_refill": False,  # the beam shrinks by one for every finished hypothesis
    "drop_finished": False,  # finished hypotheses are thrown away
    "length_norm": False,  # hypotheses ranked by their mean log-probability per token
    "new_tokens": False,  # max_len counts the tokens after <bos>
}


def reference_beam(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                   beam_size: int, **switch) -> tuple[list[int], float]:
    """The contract's beam search (``switch``: one known mistake): (best ids, its score)."""
    with torch.no_grad():
        return _reference_beam(model, src, bos, eos, max_len, beam_size, **switch)


def _reference_beam(model, src, bos, eos, max_len, beam_size, **switch):
    s = {**BEAM_SWITCHES, **switch}
    width = s["width"] or beam_size
    src_mask = source_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    alive: list[tuple[list[int], float]] = [([bos], 0.0)]
    finished: list[tuple[list[int], float]] = []
    limit = max_len + 1 if s["new_tokens"] else max_len
    kept = alive

    def rank(hyp):  # what the search sorts by
        ids, score = hyp
        return score / (len(ids) - 1) if s["length_norm"] and len(ids) > 1 else score

    while alive and len(alive[0][0]) < limit:
        k = len(alive)
        ys = torch.tensor([ids for ids, _ in alive], dtype=torch.long, device=src.device)  # (k, t)
        logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]
        step = logits.double() if s["raw_logits"] else torch.log_softmax(logits.double(), dim=-1)
        candidates = [(ids + [w], score + float(step[i, w]))
                      for i, (ids, score) in enumerate(alive) for w in range(step.shape[-1])]
        if s["finished_compete"]:
            candidates += finished
            finished = []
        slots = width - len(finished) if s["no_refill"] else width
        kept = sorted(candidates, key=rank, reverse=True)[:max(slots, 0)]
        alive = [h for h in kept if h[0][-1] != eos]
        if not s["drop_finished"]:
            finished += [h for h in kept if h[0][-1] == eos]
        if finished and alive and max(map(rank, finished)) >= max(map(rank, alive)):
            break
    return max(finished + alive or kept, key=rank)  # (kept: all were dropped, with drop_finished)


def exhaustive_search(model: TableModel, bos: int, eos: int, max_len: int) -> tuple[list[int], float]:
    """The best hypothesis of all: every sequence that ends with eos, or has max_len tokens."""
    best: tuple[list[int], float] = ([bos], -math.inf)
    frontier = [([bos], 0.0)]
    while frontier:
        ids, score = frontier.pop()
        step = torch.log_softmax(model.logits_for(tuple(ids[1:])), dim=-1)
        for w in range(model.vocab):
            hyp = (ids + [w], score + float(step[w]))
            if w == eos or len(hyp[0]) == max_len:
                best = max(best, hyp, key=lambda h: h[1])
            else:
                frontier.append(hyp)
    return best


A, B_, C = 3, 4, 5  # word ids of the scripted tables (pad 0, bos 1, eos 2)
BEAM_CASES = [
    Case("greedy is wrong: <bos> a (0.5) leads nowhere, <bos> b (0.4) <eos> (0.9) wins", 780,
         {"vocab": 6, "table": {(): {A: 0.5, B_: 0.4, 2: 0.08}, (A,): {A: 0.31, C: 0.3, 2: 0.29},
                                (B_,): {2: 0.9}},
          "bos": 1, "eos": 2, "max_len": 6, "beam_size": 2}),
    Case("a sentence finished at the first step beats the beam that goes on", 781,
         {"vocab": 6, "table": {(): {2: 0.45, A: 0.5}, (A,): {A: 0.31, B_: 0.3, C: 0.29}},
          "bos": 1, "eos": 2, "max_len": 7, "beam_size": 2}),
    Case("the beam refills after <eos>: <bos> a b <eos> (0.30) beats <bos> <eos> (0.25)", 782,
         {"vocab": 6, "table": {(): {A: 0.66, 2: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, 2: 0.02},
                                (A, B_): {2: 0.95}, (A, C): {2: 0.1, A: 0.31, B_: 0.3, C: 0.29}},
          "bos": 1, "eos": 2, "max_len": 6, "beam_size": 2}),
    Case("random table, beam_size=2", 941, {"vocab": 6, "bos": 1, "eos": 2, "max_len": 7, "beam_size": 2}),
    Case("beam_size=1 is greedy", 783, {"vocab": 7, "bos": 1, "eos": 2, "max_len": 7, "beam_size": 1}),
    Case("as wide as every hypothesis: exhaustive search", 823,
         {"vocab": 5, "bos": 1, "eos": 2, "max_len": 4, "beam_size": 25, "exhaustive": True}),
    Case("<eos> unlikely: max_len reached", 785,
         {"vocab": 5, "damp": {2: -6.0}, "bos": 1, "eos": 2, "max_len": 5, "beam_size": 3}),
    Case("bos_id=4, eos_id=3, beam_size=4", 786, {"vocab": 8, "bos": 4, "eos": 3, "max_len": 6,
                                                  "beam_size": 4}),
    Case("a Transformer of the notebook's layout, beam_size=3", 787,
         {"model": "transformer", "layers": (2, 2), "short": [1], "n_src": 6, "bos": 1, "eos": 6,
          "max_len": 8, "beam_size": 3, "confident": True}),
]


def beam_model(case: Case, device) -> tuple[nn.Module, torch.Tensor]:
    """The case's model and its one-sentence source (1, n_src)."""
    p = case.params
    if p.get("model") == "transformer":
        return decoding_model(case, device), decoding_source(case, device)
    model = TableModel(p["vocab"], case.seed, p.get("table"), damp=p.get("damp")).to(device)
    return model, torch.tensor([[7, 5, 6]], device=device)


def _beam_outputs(ids, score: float) -> Outputs:
    return {"ids": torch.tensor([ids], dtype=torch.float64),
            "score": torch.tensor(score, dtype=torch.float64)}




def _mistake(**switch):
    def run(case: Case, device) -> Outputs:
        p = case.params
        model, src = beam_model(case, device)
        return _beam_outputs(*reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"],
                                             **switch))
    return run


@registered
class BeamSearch(Exercise):
    name = NAME
    reference_name = "beam search as the contract defines it"
    mistakes = {  # the first that matches is named: the more specific ones first
        FINISHED_COMPETE: _mistake(finished_compete=True), LENGTH_NORM: _mistake(length_norm=True),
        NO_REFILL: _mistake(no_refill=True), DROP_FINISHED: _mistake(drop_finished=True),
        NEW_TOKENS: _mistake(new_tokens=True), RAW_LOGITS: _mistake(raw_logits=True),
        GREEDY: _mistake(width=1)}

    def cases(self):
        return BEAM_CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = beam_model(case, device)
        result = call_learner(self.name, self.forbidden, case, impl, model, src, p["bos"], p["eos"],
                              p["max_len"], beam_size=p["beam_size"])
        ids, score = expect_pair(result, str(case))
        (row,) = expect_token_ids(ids, f"{self.name}'s ids", 1, p["bos"], p["max_len"], str(case))
        return _beam_outputs(row, expect_score(score, str(case)))

    def reference(self, case, device):
        p = case.params
        model, src = beam_model(case, device)
        if p.get("exhaustive"):
            return _beam_outputs(*exhaustive_search(model, p["bos"], p["eos"], p["max_len"]))
        return _beam_outputs(*reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"]))

    def evaluate(self, case, got, device):
        p = case.params
        want = self.reference(case, device)
        ids, score = got["ids"].to("cpu"), float(got["score"])
        right_ids = ids.shape == want["ids"].shape and torch.equal(ids, want["ids"])
        if right_ids and close_score(score, float(want["score"])):
            return
        if (ids[0, 1:-1] == p["eos"]).any():
            raise CheckFailure(goes_on_after_eos(p["eos"], str(case)))
        if right_ids:
            raw = close_score(score, float(self.mistakes[RAW_LOGITS](case, device)["score"]))
            raise wrong_score(score, float(want["score"]), str(case), raw)
        raise not_the_best(str(case), self._diagnose(case, ids, device))

    def _diagnose(self, case: Case, ids: torch.Tensor, device):
        for mistake, run in self.mistakes.items():
            variant = run(case, device)
            if variant["ids"].shape == ids.shape and torch.equal(variant["ids"], ids):
                return mistake
        return None

    def extra_checks(self, impl, device):
        case = BEAM_CASES[0]
        p = case.params
        model, src = beam_model(case, torch.device("cpu"))
        check_unplaced_tensors(self.name, lambda: impl(model, src, p["bos"], p["eos"], p["max_len"],
                                                       beam_size=p["beam_size"]))
