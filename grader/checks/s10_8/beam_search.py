"""Hidden check of ``beam_search``: the contract's search (or an exhaustive one) on scripted tables,
seeded random logits and stand-in Transformers.

The search lives here, not in the shipped visible check (which holds snapshots of its results,
:data:`course.visible.s10_8.beam_search.EXPECTED`, made by :func:`snapshot`): nothing a learner
holds computes the answer."""

from __future__ import annotations

import math

import torch
from torch import nn

from course.visible.s10_8.beam_search import (
    DROP_FINISHED,
    FINISHED_COMPETE,
    FINISHED_EXTENDED,
    GREEDY,
    LENGTH_NORM,
    NO_REFILL,
    RAW_LOGITS,
    STEP_RANK,
    BeamSearch,
    TableModel,
    beam_case,
    beam_model,
    beam_outputs,
)
from grader.checks.exercise import GradedExercise, registered

SWITCHES = {  # each known mistake, as the switches of reference_beam that reproduce it
    FINISHED_COMPETE: {"finished_compete": True},  # finished hypotheses stay in the beam and take slots
    FINISHED_EXTENDED: {"left_in": True},  # finished hypotheses stay in the beam and are extended
    LENGTH_NORM: {"length_norm": True},  # hypotheses ranked by their mean log-probability per token
    NO_REFILL: {"no_refill": True},  # the beam shrinks by one for every finished hypothesis
    DROP_FINISHED: {"drop_finished": True},  # finished hypotheses are thrown away
    RAW_LOGITS: {"raw_logits": True},  # scores summed from raw logits instead of log-softmax
    GREEDY: {"width": 1},  # beam_size ignored
    STEP_RANK: {"step_rank": True},  # ranked by the last token's log-probability alone
}


def source_mask(src: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (src != pad_id)[:, None, None, :]  # (B, 1, 1, n_src): padding_mask, which grading alone holds


def reference_beam(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int, beam_size: int, *,
                   width: int | None = None, raw_logits=False, finished_compete=False, no_refill=False,
                   drop_finished=False, length_norm=False, new_tokens=False, step_rank=False,
                   left_in=False) -> tuple[list[int], float]:
    """The contract's beam search: (best ids, its score). The keywords switch on one known mistake
    each (``new_tokens``: max_len counted without <bos>, which the ids' length check names;
    ``step_rank``: extensions ranked by the log-probability of their last token alone; ``left_in``:
    finished hypotheses left in the beam and extended like the others, each hypothesis cut at its
    first eos only at the end)."""
    width = width or beam_size
    with torch.no_grad():
        src_mask = source_mask(src, model.pad_id)
        memory = model.encode(src, src_mask)
        # a hypothesis: (ids, score, the log-probability of its last token)
        alive: list[tuple[list[int], float, float]] = [([bos], 0.0, 0.0)]
        finished: list[tuple[list[int], float, float]] = []
        limit = max_len + 1 if new_tokens else max_len
        kept = alive

        def rank(hyp):  # what the search sorts by
            ids, score, last = hyp
            if step_rank:
                return last
            return score / (len(ids) - 1) if length_norm and len(ids) > 1 else score

        def ended(ids):  # finished: ends in eos (left_in: holds an eos after bos anywhere)
            return eos in ids[1:] if left_in else ids[-1] == eos

        while alive and len(alive[0][0]) < limit:
            k = len(alive)
            ys = torch.tensor([ids for ids, _, _ in alive], dtype=torch.long, device=src.device)  # (k, t)
            logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]
            step = logits.double() if raw_logits else torch.log_softmax(logits.double(), dim=-1)  # (k, V)
            candidates = [(ids + [w], score + float(step[i, w]), float(step[i, w]))
                          for i, (ids, score, _) in enumerate(alive) for w in range(step.shape[-1])]
            if finished_compete:
                candidates += finished
                finished = []
            slots = width - len(finished) if no_refill else width
            kept = sorted(candidates, key=rank, reverse=True)[:max(slots, 0)]
            if left_in:  # every hypothesis goes on; the search ends when each holds an eos
                alive = kept
                if all(ended(ids) for ids, _, _ in kept):
                    break
                continue
            alive = [h for h in kept if not ended(h[0])]
            if not drop_finished:
                finished += [h for h in kept if ended(h[0])]
            if finished and alive and max(map(rank, finished)) >= max(map(rank, alive)):
                break
        if left_in:  # cut each at its first eos, scored up to it
            alive = [_cut(model, src, ids, eos) for ids, _, _ in alive]
        ids, score, _ = max(finished + alive or kept, key=rank)  # (kept: all dropped, with drop_finished)
        return ids, score


def _cut(model: nn.Module, src: torch.Tensor, ids: list[int], eos: int) -> tuple[list[int], float, float]:
    """``ids`` up to its first eos after bos, with the sum of the log-probabilities of its tokens."""
    n = ids.index(eos, 1) + 1 if eos in ids[1:] else len(ids)
    ids = ids[:n]
    with torch.no_grad():
        src_mask = source_mask(src, model.pad_id)
        tgt = torch.tensor([ids], device=src.device)  # (1, n)
        logits = model.decode(tgt[:, :-1], model.encode(src, src_mask), src_mask)[0].double()
        log_probs = torch.log_softmax(logits, dim=-1).gather(-1, tgt[0, 1:, None])[:, 0]  # (n - 1,)
    return ids, float(log_probs.sum()), float(log_probs[-1]) if len(log_probs) else 0.0


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


def raw_score(model: nn.Module, src: torch.Tensor, ids: list[int]) -> float:
    """The sum of the raw logits of ids[1:]: what a search that skips log-softmax scores them."""
    with torch.no_grad():
        src_mask = source_mask(src, model.pad_id)
        tgt = torch.tensor([ids], device=src.device)  # (1, n)
        logits = model.decode(tgt[:, :-1], model.encode(src, src_mask), src_mask)[0].double()  # (n - 1, V)
        return float(logits.gather(-1, tgt[0, 1:, None]).sum())


A, B_, C = 3, 4, 5  # word ids of the scripted tables (pad 0, bos 1, eos 2)
BEAM_CASES = [
    beam_case("greedy is wrong: <bos> a (0.5) leads nowhere, <bos> b (0.4) <eos> (0.9) wins", 780,
              "scripted table", 6, 2, vocab=6,
              table={(): {A: 0.5, B_: 0.4, 2: 0.08}, (A,): {A: 0.31, C: 0.3, 2: 0.29}, (B_,): {2: 0.9}}),
    beam_case("random logits, beam_size=3: ranked by the total score, no length penalty, finished ones apart",
              286, "random logits", 5, 3, vocab=4),
    beam_case("random logits, beam_size=2: a finished hypothesis left in the beam, extended, falls out of it",
              121, "random logits", 5, 2, vocab=5),
    beam_case("random logits, beam_size=3: the finished hypotheses must take no slot", 269, "random logits",
              5, 3, vocab=5),
    beam_case("random logits, beam_size=2: ranked by the total score, not the last token's", 112,
              "random logits", 5, 2, vocab=5),
    beam_case("a sentence finished at the first step beats the beam that goes on", 781, "scripted table",
              7, 2, vocab=6, table={(): {2: 0.45, A: 0.5}, (A,): {A: 0.31, B_: 0.3, C: 0.29}}),
    beam_case("the beam refills after <eos>: <bos> a b <eos> (0.30) beats <bos> <eos> (0.25)", 782,
              "scripted table", 6, 2, vocab=6,
              table={(): {A: 0.66, 2: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, 2: 0.02}, (A, B_): {2: 0.95},
                     (A, C): {2: 0.1, A: 0.31, B_: 0.3, C: 0.29}}),
    beam_case("random table, beam_size=2", 941, "random logits", 7, 2, vocab=6),
    beam_case("beam_size=1 is greedy", 783, "random logits", 7, 1, vocab=7),
    beam_case("as wide as every hypothesis: exhaustive search", 823, "a beam wider than the extensions",
              4, 25, vocab=5, exhaustive=True),
    beam_case("<eos> unlikely: max_len reached", 785, "max_len reached", 5, 3, vocab=5, damp={2: -6.0}),
    beam_case("bos_id=4, eos_id=3, beam_size=4", 786, "bos_id and eos_id not 1 and 2", 6, 4, bos=4, eos=3,
              vocab=8),
    beam_case("a stand-in Transformer (post-norm, 2 + 2 blocks), a source with 1 pad, beam_size=3", 910,
              "a Transformer, a padded source", 8, 3, eos=9, layers=(2, 2), short=[1], n_src=6),
]


def search(case, model: nn.Module, src: torch.Tensor, **switch) -> tuple[list[int], float]:
    """The case's best hypothesis on its ``model`` and ``src`` (``switch``: with one known mistake)."""
    p = case.params
    if p.get("exhaustive") and not switch:
        return exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
    return reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"], **switch)


def best(case, model: nn.Module, src: torch.Tensor) -> tuple[list[int], float, float]:
    """The case's best hypothesis: its ids, its score and its score summed from the raw logits."""
    ids, score = search(case, model, src)
    return ids, score, raw_score(model, src, ids)


def snapshot() -> dict:
    """The visible cases' best hypotheses (score and raw score to 12 significant digits), and each
    known mistake's where its ids differ: what the visible check ships instead of this module's code."""
    out = {}
    for case in BeamSearch.visible_cases:
        model, src = beam_model(case, torch.device("cpu"))
        ids, score, raw = best(case, model, src)
        entry = {"reference": {"ids": ids, "score": _rounded(score), "raw": _rounded(raw)}}
        for mistake, switch in SWITCHES.items():
            wrong_ids, wrong = search(case, model, src, **switch)
            if wrong_ids != ids:
                entry[mistake.name] = {"ids": wrong_ids, "score": _rounded(wrong)}
        out[case.name] = entry
    return out


def _with_mistake(switch: dict):
    """``run(case, device)``: the case's search with one known mistake, as outputs."""
    return lambda case, device: beam_outputs(*search(case, *beam_model(case, device), **switch))


def _rounded(x: float) -> float:
    return float(f"{x:.12g}")


@registered
class GradedBeamSearch(BeamSearch, GradedExercise):
    mistakes = {mistake: _with_mistake(switch) for mistake, switch in SWITCHES.items()}

    def cases(self):
        return BEAM_CASES

    def reference(self, case, device):
        ids, score, raw = best(case, *beam_model(case, device))
        return beam_outputs(ids, score, raw=raw)
