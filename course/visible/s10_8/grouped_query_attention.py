"""``grouped_query_attention(Q, K, V, mask=None) -> (output, weights)``: the exercise (inputs,
reference, known mistakes, visible cases) and its visible check.

The reference is PyTorch's attention with ``enable_gqa=True`` (or, on a torch without it, with K
and V repeated in place by ``repeat_interleave``); the weights come from the same function with
identity values. Wrong variants come from PyTorch's functions with other arguments.
"""

from __future__ import annotations

import re
from functools import cache

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    expect_pair,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.forbidden import ATTENTION
from course.checking.masks import case_mask
from course.visible.s10_2.scaled_dot_product_attention import NO_SCALE, shift_scores

NAME = "grouped_query_attention"
NAMES = ("output", "weights")

TILED = Mistake("kv_heads_tiled", "key/value heads tiled: query head j reading key/value head j % g",
                "Consecutive query heads share a key/value head: with r = h // g query heads per group, "
                "heads 0 .. r-1 read key/value head 0, the next r read head 1, and so on. Repeating the "
                "whole stack of key/value heads (repeat, tile, a view of the queries as (B, r, g, ...)) "
                "cycles through them instead.")
MASK_PER_KV_HEAD = Mistake("mask_per_kv_head", "a per-head mask read per key/value head (query head j "
                           "given the mask of head j // (h // g))",
                           "The mask's head axis counts the query heads: query head j is blocked where mask "
                           "head j says, although it shares its keys with the other heads of its group.")
NOT_DIVIDING = ("should raise ValueError when the key/value heads do not divide the query heads (each "
                "key/value head serves h // g query heads)")


def dims(B: int, h: int, g: int, n_q: int, n_k: int, d_k: int = 4, d_v: int = 6, mask: str = "none",
         **large) -> dict:
    """A case's shapes, Q (B, h, n_q, d_k), K (B, g, n_k, d_k), V (B, g, n_k, d_v), its kind of mask
    ("heads": one random mask per query head, (h, n_q, n_k), shared by the batch) and ``shift``
    (:func:`~course.visible.s10_2.scaled_dot_product_attention.shift_scores`)."""
    return {"B": B, "h": h, "g": g, "n_q": n_q, "n_k": n_k, "d_k": d_k, "d_v": d_v, "mask": mask, **large}


CASES = [
    Case("h=4 query heads, g=2 key/value heads, no mask", 80, dims(2, 4, 2, 3, 5), kind="grouped, no mask"),
    Case("h=6, g=3, a different random mask per query head (B, h, n_q, n_k)", 81,
         dims(2, 6, 3, 3, 5, mask="random"), kind="grouped, per-head mask"),
    Case("h=6, g=2, one mask per query head (h, n_q, n_k) for the whole batch", 82,
         dims(2, 6, 2, 3, 5, mask="heads"), kind="per-head mask without a batch axis"),
    Case("h=4, g=1 (multi-query), causal mask (n, n)", 83, dims(2, 4, 1, 5, 5, mask="causal"),
         kind="multi-query, causal mask"),
    Case("h=3, g=3 (multi-head), padding mask (B, 1, 1, n_k)", 84, dims(2, 3, 3, 3, 5, mask="padding"),
         kind="multi-head, padding mask"),
    Case("float32, h=4, g=2, padding and causal mask", 85, dims(2, 4, 2, 5, 5, mask="padding+causal"),
         torch.float32, kind="float32"),
    Case("h=4, g=2, every score near -1.25e5, far below -1e4, padding mask", 86,
         dims(2, 4, 2, 3, 5, mask="padding", shift=1.25e5), kind="scores far below -1e4"),
]


def inputs(case: Case, device):
    """Q, K, V (leaves) and the mask of a case."""
    p, g = case.params, generator(case.seed)
    x = {"Q": randn((p["B"], p["h"], p["n_q"], p["d_k"]), g, case.dtype, device),
         "K": randn((p["B"], p["g"], p["n_k"], p["d_k"]), g, case.dtype, device),
         "V": randn((p["B"], p["g"], p["n_k"], p["d_v"]), g, case.dtype, device)}
    shift_scores(x["Q"], x["K"], p.get("shift", 0.0))
    kind, lead = p["mask"], (p["B"], p["h"])
    mask = case_mask("random", (p["h"],), p["n_q"], p["n_k"], g) if kind == "heads" else \
        case_mask(kind, lead, p["n_q"], p["n_k"], g)
    return {k: v.requires_grad_() for k, v in x.items()}, None if mask is None else mask.to(device)


def outputs(attend, case: Case, device):
    """Forward and backward of ``attend(Q, K, V, mask) -> (output, weights)`` on a case."""
    x, mask = inputs(case, device)
    return with_gradients(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, case.seed)


@cache
def has_enable_gqa() -> bool:
    """Does this torch's F.scaled_dot_product_attention take ``enable_gqa`` (2.5 and later)?"""
    try:
        F.scaled_dot_product_attention(*torch.zeros(3, 1, 2, 1, 1), enable_gqa=True)
    except TypeError:
        return False
    return True


def in_place(K: torch.Tensor, h: int) -> torch.Tensor:
    """(B, g, n, d) -> (B, h, n, d): each key/value head repeated for the h // g query heads it serves."""
    return K.repeat_interleave(h // K.shape[1], dim=1)


def pytorch_gqa(Q, K, V, mask, **options):
    """F.scaled_dot_product_attention with g key/value heads: (B, h, n_q, d_v)."""
    if has_enable_gqa():
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, enable_gqa=True, **options)
    h = Q.shape[1]
    return F.scaled_dot_product_attention(Q, in_place(K, h), in_place(V, h), attn_mask=mask, **options)


def pytorch_attention(Q, K, V, mask, **options):
    """(output, weights) of grouped-query attention: the weights are the attention of identity values."""
    n_k = K.shape[-2]
    identity = torch.eye(n_k, dtype=K.dtype, device=K.device).expand(*K.shape[:-1], n_k)  # (B, g, n_k, n_k)
    return pytorch_gqa(Q, K, V, mask, **options), pytorch_gqa(Q, K, identity, mask, **options)


def _tiled(Q, K, V, mask):
    """Query head j reads key/value head j % g: the stack of key/value heads repeated whole."""
    r = Q.shape[1] // K.shape[1]
    return pytorch_attention(Q, K.repeat(1, r, 1, 1), V.repeat(1, r, 1, 1), mask)


def _mask_per_kv_head(Q, K, V, mask):
    """Query head j given mask head j // r (the index of its key/value head)."""
    (B, h, n_q, _), (_, g, n_k, _) = Q.shape, K.shape
    if mask is not None:
        mask = in_place(mask.expand(B, h, n_q, n_k)[:, :g], h)  # (B, h, n_q, n_k)
    return pytorch_attention(Q, K, V, mask)


def _unscaled(Q, K, V, mask):
    return pytorch_attention(Q, K, V, mask, scale=1.0)


def _wrong(attend):
    """A known mistake's outputs on a case."""
    return lambda case, device: outputs(attend, case, device)


class GroupedQueryAttention(Exercise):
    forbidden = ATTENTION
    name = NAME
    reference_name = "F.scaled_dot_product_attention(enable_gqa=True)"
    mistakes = {TILED: _wrong(_tiled), MASK_PER_KV_HEAD: _wrong(_mask_per_kv_head),
                NO_SCALE: _wrong(_unscaled)}
    visible_cases = CASES

    def run(self, impl, case, device):
        def learner(Q, K, V, mask):
            got = expect_pair(self.call(case, impl, Q, K, V, mask=mask), self.name, case)
            for what, t in zip(NAMES, got):
                if t.dtype != Q.dtype:
                    raise CheckFailure(f"{self.name}'s {what} is {t.dtype} for Q of {Q.dtype} in {case}: "
                                       "return the dtype of Q (compute in it, with no conversion).")
            return got

        return outputs(learner, case, device)

    def reference(self, case, device):
        return outputs(pytorch_attention, case, device)

    def evaluate(self, case, got, device):
        if "shift" in case.params and not all(torch.isfinite(t).all() for t in got.values()):
            raise CheckFailure(f"{self.name} gives inf or NaN in {case}: fill blocked scores with -inf "
                               "before a numerically stable softmax.")
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        for h, g in ((6, 4), (2, 4)):
            Q = torch.zeros(1, h, 2, 4, device=device)
            K = torch.zeros(1, g, 3, 4, device=device)
            self.expect_refused(impl, h, g, Q, K)

    def expect_refused(self, impl, h: int, g: int, Q, K) -> None:
        """Fail unless ``impl`` raises a ValueError that names both head counts for h query and g
        key/value heads."""
        where = f"h={h} query heads and g={g} key/value heads"
        try:
            self.call(Case(where, 0), impl, Q, K, K, mask=None)
        except CheckFailure as failure:
            error = failure.__cause__
            if error is None:  # not written yet, or a forbidden call: its own message
                raise
            if not isinstance(error, ValueError):
                raise CheckFailure(f"{self.name} {NOT_DIVIDING}, as for {where}; it raised "
                                   f"{type(error).__name__}: {error}") from None
            if not {str(h), str(g)} <= set(re.findall(r"\d+", str(error))):
                raise CheckFailure(f"{self.name}'s ValueError for {where} should name both numbers, "
                                   f"{h} and {g}, so that the caller sees what to change; it says: "
                                   f"{error}") from None
            return
        raise CheckFailure(f"{self.name} {NOT_DIVIDING}, as for {where}; it raised nothing.")


@visible_check
def check_grouped_query_attention(grouped_query_attention) -> None:
    """Against F.scaled_dot_product_attention(enable_gqa=True): grouped, multi-query and multi-head,
    per-head and shared masks, gradients, float32, the error for heads that do not divide."""
    GroupedQueryAttention().run_cases(grouped_query_attention)
    passed("grouped_query_attention matches PyTorch's grouped-query attention for g = h, g = 1 and in "
           "between, with every kind of mask (one per query head too), gradients included, and refuses "
           "key/value heads that do not divide the query heads.")
