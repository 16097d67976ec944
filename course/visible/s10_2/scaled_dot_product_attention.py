"""Visible check of ``scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)``,
and its known mistakes.

Wrong variants come from PyTorch's function with other arguments (``scale=1.0``, the mask
inverted, the query and key roles exchanged).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_pair,
    passed,
    seeded,
    visible_check,
    with_gradients,
)

NO_SCALE = Mistake("no_scale", "attention without the 1/sqrt(d_k) scaling",
                   "Divide the scores QK^T by sqrt(d_k) before the softmax.")
SCALE_DK = Mistake("scale_dk", "scaling by d_k instead of sqrt(d_k)",
                   "The scale is 1/sqrt(d_k): math.sqrt(Q.shape[-1]).")
SCALE_DV = Mistake("scale_dv", "scaling by sqrt(d_v), the width of the values",
                   "d_k is the width of the queries and keys: Q.shape[-1].")
SCALE_N = Mistake("scale_n", "scaling by the square root of a sequence length, not of d_k",
                  "d_k is the last axis of Q: math.sqrt(Q.shape[-1]), not Q.shape[-2].")
SOFTMAX_QUERIES = Mistake("softmax_queries", "a softmax over the query axis (dim=-2)",
                          "Each query's weights over the keys sum to 1: softmax over dim=-1.")
MASK_INVERTED = Mistake("mask_inverted", "the mask inverted",
                        "True means *may attend*: fill the scores where the mask is False "
                        "(scores.masked_fill(~mask, float('-inf'))).")
MASK_AFTER_SOFTMAX = Mistake("mask_after_softmax", "the mask applied after the softmax",
                             "Mask the scores before the softmax, so the visible keys' weights still "
                             "sum to 1.")
MASK_ZERO = Mistake("mask_zero", "masked scores set to 0 instead of -inf",
                    "A score of 0 still gets weight exp(0); use float('-inf').")
FILL_FINITE = Mistake("mask_fill_finite", "blocked scores filled with a finite number such as -1e4",
                      "A blocked pair gets weight exactly 0 whatever the other scores are: fill with "
                      "float('-inf') (or torch.finfo(scores.dtype).min), not with a number a score can "
                      "fall below.")
#: The finite fill published code often uses, and what a case's allowed scores sit far below.
FINITE_FILL = -1e4

NAMES = ("output", "weights")
CASES = [  # name, leading dims, n_q, n_k, d_k, d_v, mask, dtype, scale of Q and K, shift (see below)
    ("2-D Q (3, 4), K (5, 4), V (5, 6), no mask", (), 3, 5, 4, 6, None, torch.float64, 1.0, 0.0),
    ("a batch, n_q=3 queries and n_k=5 keys, no mask", (2,), 3, 5, 4, 6, None, torch.float32, 1.0, 0.0),
    ("4-D (batch, heads), a different mask per head", (2, 3), 3, 5, 4, 6, "random", torch.float64, 1.0, 0.0),
    ("causal mask (5, 5)", (2,), 5, 5, 4, 6, "causal", torch.float64, 1.0, 0.0),
    ("padding mask (B, 1, n_k)", (2,), 3, 5, 4, 6, "padding", torch.float64, 1.0, 0.0),
    ("float32, scores of magnitude 1e4, padding mask", (2,), 3, 5, 4, 6, "padding", torch.float32, 60.0, 0.0),
    ("every score near -1.25e5, far below -1e4, padding mask", (2,), 3, 5, 4, 6, "padding", torch.float64,
     1.0, 1.25e5),
]


def overflowed(where: str) -> CheckFailure:
    """The failure for inf or NaN on large scores (both sides word it so)."""
    return CheckFailure(f"scaled_dot_product_attention gives inf or NaN in {where}. Use a numerically "
                        "stable softmax (subtract the row maximum) and fill masked scores with -inf "
                        "before it.")


def case_mask(kind, lead, n_q, n_k, seed):
    """A bool mask, True = may attend; every query keeps at least one key and loses one."""
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)  # (n_q, n_k)
    if kind == "padding":
        lengths = torch.tensor([n_k - 2] + [n_k - 1] * (lead[0] - 1))  # sentence 0: 2 pads
        keep = torch.arange(n_k) < lengths[:, None]  # (B, n_k)
        return keep.view(lead[0], *([1] * (len(lead) - 1)), 1, n_k)  # (B, [1,] 1, n_k)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*lead, n_q, n_k, generator=g) < 0.5
    mask[..., 0], mask[..., -1] = True, False  # key 0 always visible, the last one never
    return mask


def shift_scores(Q: torch.Tensor, K: torch.Tensor, below: float) -> None:
    """Move every score down by about ``below`` (in place): feature 0 of every key set to -2 and
    of every query to below·sqrt(d_k)/2, so a row's allowed scores all sit far below a finite fill.
    The large number sits in Q, whose feature-0 gradient is a sum that cancels to 0."""
    if below:
        Q[..., 0], K[..., 0] = below * math.sqrt(Q.shape[-1]) / 2, -2.0


def attention_inputs(lead, n_q, n_k, d_k, d_v, kind, dtype, scale, shift, seed):
    """Q, K, V (fresh leaves) and the mask of a case."""
    x = {"Q": seeded(*lead, n_q, d_k, seed=seed, dtype=dtype, scale=scale),
         "K": seeded(*lead, n_k, d_k, seed=seed + 1, dtype=dtype, scale=scale),
         "V": seeded(*lead, n_k, d_v, seed=seed + 2, dtype=dtype)}
    shift_scores(x["Q"], x["K"], shift)
    return {k: v.requires_grad_() for k, v in x.items()}, case_mask(kind, lead, n_q, n_k, seed)


def pytorch_weights(Q, K, mask, **options):
    """softmax(QK^T * scale, masked) from F.scaled_dot_product_attention with identity values."""
    identity = torch.eye(K.shape[-2], dtype=K.dtype).expand(*K.shape[:-1], K.shape[-2])
    return F.scaled_dot_product_attention(Q, K, identity, attn_mask=mask, **options)


def pytorch_attention(Q, K, V, mask, **options):
    return (F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, **options),
            pytorch_weights(Q, K, mask, **options))


def _outputs(attend, spec, seed):
    x, mask = attention_inputs(*spec, seed=seed)
    return with_gradients(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, seed)


def _from_weights(weights_of):
    """A wrong attention whose weights are ``weights_of(Q, K, mask)``."""
    def attend(Q, K, V, mask):
        weights = weights_of(Q, K, mask)
        return weights @ V, weights
    return attend


def _over_queries(Q, K, mask):
    """Each key's weights over the queries sum to 1: the softmax over dim=-2."""
    flipped = None if mask is None else mask.transpose(-2, -1)
    return pytorch_weights(K, Q, flipped, scale=1 / math.sqrt(Q.shape[-1])).transpose(-2, -1)


def _inverted(Q, K, mask):
    """The mask used the other way round; rows left without a key are NaN, as 0/0 gives them."""
    if mask is None:
        return pytorch_weights(Q, K, None)
    weights = pytorch_weights(Q, K, ~mask)
    nothing = (~mask).expand_as(weights).sum(-1, keepdim=True) == 0
    return weights.masked_fill(nothing, float("nan"))


def _filled(value: float):
    """Blocked scores set to ``value`` instead of -inf: an additive mask that replaces the score."""
    def weights(Q, K, mask):
        if mask is None:
            return pytorch_weights(Q, K, None)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., n_q, n_k)
        return pytorch_weights(Q, K, (value - scores).masked_fill(mask, 0.0))
    return weights


def _after_softmax(Q, K, mask):
    return pytorch_weights(Q, K, None) * (1 if mask is None else mask)


def _variants(spec, seed):
    """The known mistakes on one case, each with the outputs it gives there."""
    d_k, d_v, n_q = spec[3], spec[4], spec[1]
    weights = {NO_SCALE: partial(pytorch_weights, scale=1.0),
               SCALE_DK: partial(pytorch_weights, scale=1 / d_k),
               SCALE_DV: partial(pytorch_weights, scale=1 / math.sqrt(d_v)),
               SCALE_N: partial(pytorch_weights, scale=1 / math.sqrt(n_q)),
               SOFTMAX_QUERIES: _over_queries, MASK_INVERTED: _inverted,
               MASK_AFTER_SOFTMAX: _after_softmax, FILL_FINITE: _filled(FINITE_FILL), MASK_ZERO: _filled(0.0)}
    return {mistake: partial(_outputs, _from_weights(of), spec, seed) for mistake, of in weights.items()}


@visible_check
def check_scaled_dot_product_attention(scaled_dot_product_attention) -> None:
    """Against F.scaled_dot_product_attention: 2-D to 4-D, n_q != n_k, masks, large scores."""
    for seed, (case, *spec) in enumerate(CASES):
        where = f"case '{case}'"

        def learner(Q, K, V, mask, where=where):
            out = call_learner("scaled_dot_product_attention", where, scaled_dot_product_attention,
                               Q, K, V, mask=mask)
            return expect_pair(out, "scaled_dot_product_attention")

        got = _outputs(learner, spec, 100 * seed)
        if (spec[7] > 1 or spec[8]) and not all(torch.isfinite(t).all() for t in got.values()):
            raise overflowed(where)
        compare_outputs(got, _outputs(pytorch_attention, spec, 100 * seed), "scaled_dot_product_attention",
                        where, against="F.scaled_dot_product_attention", variants=_variants(spec, 100 * seed))
    Q, K, V = torch.ones(2, 3, 4), torch.ones(2, 5, 4), torch.ones(2, 5, 6)  # made outside the probe
    mask = torch.ones(3, 5, dtype=torch.bool)
    check_unplaced_tensors("scaled_dot_product_attention",
                            lambda: scaled_dot_product_attention(Q, K, V, mask=mask))
    passed("scaled_dot_product_attention matches PyTorch on 2-D to 4-D inputs, with every kind of mask; "
           "blocked pairs get weight 0 even when every score is far below -1e4.")
