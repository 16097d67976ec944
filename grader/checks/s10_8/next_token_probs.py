"""Hidden check of ``next_token_probs``: against the contract's rule (torch.softmax, pairwise ranks), or a
filter that cuts tied tokens at its boundary (the numbers of tokens it may keep, :func:`kept_counts`).

The contract's computation lives here, not in the shipped visible check (which holds snapshots of it,
:data:`course.visible.s10_8.next_token_probs.EXPECTED`, made by :func:`snapshot`): nothing a learner
holds computes the answer."""

from __future__ import annotations

from dataclasses import replace

import torch

from course.visible.s10_8.next_token_probs import (
    GREEDY_TIES_SPLIT,
    KEPT,
    NOT_RENORMALISED,
    TEMPERATURE_MULTIPLIED,
    TOP_K_ONE_TOO_MANY,
    TOP_P_AT_MOST,
    TOP_P_BEFORE_TEMPERATURE,
    TOP_P_BEFORE_TOP_K,
    TOP_P_DROPS_CROSSING,
    UNSORTED_MASK,
    ZERO_AS_ONE,
    NextTokenProbs,
    logits_of,
    options_of,
    probs_case,
)
from grader.checks.exercise import GradedExercise, registered


def _renormalised(probs, keep):
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def _strictly_ahead(probs):
    """(count, mass) of the tokens strictly more likely than each token: (..., V) each."""
    ahead = probs[..., None, :] > probs[..., :, None]  # (..., V, V): [i, j] = p_j > p_i
    return ahead.sum(-1), (ahead * probs[..., None, :]).sum(-1)


def _top_k(probs, k, kind="ok"):
    if kind == "one too many":  # every token at least as likely as the (k+1)-th
        return _strictly_ahead(probs)[0] < k + 1
    if kind == "topk indices":  # exactly k, ties cut in torch.topk's order
        index = probs.topk(min(k, probs.shape[-1]), dim=-1).indices
        return torch.zeros_like(probs).scatter(-1, index, 1.0).bool()
    return _strictly_ahead(probs)[0] < k


def _top_p(probs, p, kind="ok"):
    if kind in ("sorted", "drops crossing", "unsorted", "at most"):  # token by token, stable descending order
        order = probs.sort(dim=-1, descending=True, stable=True)
        through = order.values.cumsum(-1)  # (..., V): the mass of the ranks up to each rank
        kept = {"drops crossing": through < p, "at most": through - order.values <= p}.get(
            kind, through - order.values < p)
        if kind == "unsorted":  # the ranks' mask applied to the tokens as they come
            return kept
        return torch.zeros_like(probs).scatter(-1, order.indices, kept.to(probs.dtype)).bool()
    return _strictly_ahead(probs)[1] < p


def contract_probs(logits, temperature=1.0, top_k=None, top_p=None, *, k_kind="ok", p_kind="ok",
                   p_first=False, times=False, renormalise=True, greedy_split=False, filter_at=None,
                   zero_as_one=False):
    """The contract's probabilities; the keywords switch on known mistakes, or on a cut of the tied tokens
    at a filter's boundary (:data:`TIE_CUTS`, accepted too)."""
    if temperature == 0 and zero_as_one:
        temperature = 1.0
    if temperature == 0:
        if greedy_split:
            return _renormalised(torch.ones_like(logits), logits == logits.amax(-1, keepdim=True))
        return torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    probs = torch.softmax(logits * temperature if times else logits / temperature, dim=-1)  # (..., V)
    chooser = probs if filter_at is None else torch.softmax(logits / filter_at, dim=-1)
    steps = [("p", top_p), ("k", top_k)] if p_first else [("k", top_k), ("p", top_p)]
    for kind, value in steps:
        if value is None:
            continue
        keep = _top_k(chooser, value, k_kind) if kind == "k" else _top_p(chooser, value, p_kind)
        probs = _renormalised(probs, keep) if renormalise else probs * keep
        chooser = probs if filter_at is None else _renormalised(chooser, keep)
    return probs


VARIANTS = {
    TOP_P_DROPS_CROSSING: {"p_kind": "drops crossing"}, TOP_P_AT_MOST: {"p_kind": "at most"},
    TOP_P_BEFORE_TEMPERATURE: {"filter_at": 1.0},
    TOP_P_BEFORE_TOP_K: {"p_first": True}, TOP_K_ONE_TOO_MANY: {"k_kind": "one too many"},
    UNSORTED_MASK: {"p_kind": "unsorted"}, TEMPERATURE_MULTIPLIED: {"times": True},
    NOT_RENORMALISED: {"renormalise": False}, ZERO_AS_ONE: {"zero_as_one": True},
    GREEDY_TIES_SPLIT: {"greedy_split": True},
}


#: How a filter may cut the tokens tied at its boundary: not at all (the contract), or in some order.
TIE_CUTS = [{"k_kind": k, "p_kind": p} for k in ("ok", "topk indices") for p in ("ok", "sorted")]


def kept_counts(logits, temperature=1.0, top_k=None, top_p=None) -> list[list[int]] | None:
    """Per row, the numbers of tokens an answer may keep: the contract's (ties together), or either filter's
    cutting a group of tied tokens at its boundary (exactly k; the smallest mass that reaches p); None at
    temperature 0 or without a filter."""
    if temperature == 0 or (top_k is None and top_p is None):
        return None
    V = logits.shape[-1]
    kept = [(contract_probs(logits, temperature, top_k, top_p, **cut) > 0).reshape(-1, V).sum(-1)
            for cut in TIE_CUTS]  # (rows,) each
    return [sorted(set(row)) for row in torch.stack(kept, -1).tolist()]


def snapshot() -> dict:
    """The visible cases' expected probabilities (float64, 12 significant digits), and each known
    mistake's where it differs: what the visible check ships instead of this module's code."""
    out = {}
    for case in NextTokenProbs.visible_cases:
        logits, options = logits_of(replace(case, dtype=torch.float64), "cpu"), options_of(case)
        want = contract_probs(logits, **options)
        entry = {"reference": _rounded(want)}
        counts = kept_counts(logits, **options)
        if counts is not None:
            entry[KEPT] = counts
        for mistake, changes in VARIANTS.items():
            wrong = contract_probs(logits, **options, **changes)
            if torch.isfinite(wrong).all() and not torch.allclose(wrong, want, rtol=1e-6, atol=1e-9):
                entry[mistake.name] = _rounded(wrong)
        out[case.name] = entry
    return out


def _rounded(probs: torch.Tensor):
    return [float(f"{x:.12g}") for x in probs.flatten().tolist()]


SETTINGS = [  # name, logits (the visible check's tied rows, or a shape of random logits), T, k, p
    ("tied rows, temperature 1", ("rows", (3,)), 1.0, None, None),
    ("tied rows, temperature 0", ("rows", (3,)), 0.0, None, None),
    ("tied rows, top_k=2", ("rows", (3,)), 1.0, 2, None),
    ("tied rows, top_k=5 (ties at the k-th)", ("rows", (3,)), 0.9, 5, None),
    ("tied rows, top_p=0.65 (ties across p)", ("rows", (3,)), 1.7, None, 0.65),
    ("tied rows, top_k=3 then top_p=0.75", ("rows", (3,)), 1.2, 3, 0.75),
    ("random 1-D logits, temperature 0.5", ("random", (9,)), 0.5, None, None),
    ("random logits (2, 3, V), top_k=1", ("random", (2, 3, 7)), 1.3, 1, None),
    ("random logits (4, V), top_k larger than V", ("random", (4, 6)), 1.0, 10, None),
    ("random logits (3, V), top_k equal to V, top_p=0.6", ("random", (3, 5)), 0.8, 5, 0.6),
    ("random logits (4, V), top_p=0.3", ("random", (4, 10)), 1.0, None, 0.3),
    ("random logits (2, 2, V), temperature 2, top_k=4, top_p=0.5", ("random", (2, 2, 12)), 2.0, 4, 0.5),
    ("random logits (3, V), temperature 0", ("random", (3, 9)), 0.0, 2, 0.9),
    ("probabilities 1/4, 1/4, then four of 1/8, top_p=0.5: mass ahead exactly p",
     ("log", (2.0, 2.0, 1.0, 1.0, 1.0, 1.0)), 1.0, None, 0.5),
    ("probabilities 1/2, 1/4, 1/4, top_k=3 then top_p=0.5", ("log", (2.0, 1.0, 1.0)), 1.0, 3, 0.5),
]
CASES = [probs_case(f"{name}, {str(dtype).removeprefix('torch.')}", 1000 + i, logits, T, k, p, dtype)
         for i, (name, logits, T, k, p) in enumerate(SETTINGS) for dtype in (torch.float64, torch.float32)]


@registered
class GradedNextTokenProbs(NextTokenProbs, GradedExercise):
    mistakes = {m: (lambda case, device, c=c: {"output": contract_probs(logits_of(case, device),
                                                                        **options_of(case), **c)})
                for m, c in VARIANTS.items()}

    def cases(self):
        return CASES

    def reference(self, case, device):
        return {"output": contract_probs(logits_of(case, device), **options_of(case))}

    def kept_counts(self, case):
        return kept_counts(logits_of(replace(case, dtype=torch.float64), "cpu"), **options_of(case))
