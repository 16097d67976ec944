"""``scaled_dot_product_attention(Q, K, V, mask=None) -> (output, weights)``: the exercise (inputs,
reference, known mistakes, visible cases) and its visible check.

Wrong variants come from PyTorch's function with other arguments (``scale=1.0``, the mask
inverted, the query and key roles exchanged).
"""

from __future__ import annotations

import math
from functools import partial

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
from course.checking.compare import float32_inside
from course.checking.forbidden import ATTENTION
from course.checking.masks import case_mask
from course.checking.pieces import softmax

NO_SCALE = Mistake("no_scale", "attention without the 1/sqrt(d_k) scaling",
                   "The scores QK^T are divided by sqrt(d_k) before the softmax: look for that step.")
SCALE_DK = Mistake("scale_dk", "scaling by d_k instead of sqrt(d_k)",
                   "The scores are divided by the square root of d_k, not by d_k itself.")
SCALE_DV = Mistake("scale_dv", "scaling by sqrt(d_v), the width of the values",
                   "d_k is the width of the queries and keys (their last axis), not of the values.")
SCALE_N = Mistake("scale_n", "scaling by the square root of a sequence length, not of d_k",
                  "d_k counts the features of a query (the last axis of Q), not the queries or keys "
                  "(the axis before it).")
SOFTMAX_QUERIES = Mistake("softmax_queries", "a softmax over the query axis (dim=-2)",
                          "Each query's weights over the keys sum to 1: softmax over dim=-1.")
MASK_INVERTED = Mistake("mask_inverted", "the mask inverted",
                        "True means *may attend*: the pairs to block are those where the mask is "
                        "False. Look at which pairs your fill reaches.")
MASK_AFTER_SOFTMAX = Mistake("mask_after_softmax", "the mask applied after the softmax",
                             "Mask the scores before the softmax, so the visible keys' weights still "
                             "sum to 1.")
MASK_ZERO = Mistake("mask_zero", "masked scores set to 0 instead of -inf",
                    "A blocked score of 0 still gets the weight exp(0) / (sum of the row), more than 0: "
                    "a blocked pair needs a score whose exponential is exactly 0.")
FILL_FINITE = Mistake("mask_fill_finite", "blocked scores filled with a finite number such as -1e4",
                      "A blocked pair gets weight exactly 0 for any allowed scores above -1e8 (the checks "
                      "try rows near -1.25e5): fill with float('-inf') (or torch.finfo(scores.dtype).min, "
                      "or -1e9), not with a number the scores can fall below.")
FLOAT32_INSIDE = Mistake(
    "float32_inside", "attention computed in float32 for float64 inputs (cast with .float(), or float32 "
    "tensors made inside), then cast back: the results have float32's precision",
    "Compute in the dtype of Q, K and V: float64 inputs give float64 results at float64's precision. Look "
    "for .float(), .to(torch.float32) or dtype=torch.float32 in the function.")
#: The finite fill published code often uses, and what a case's allowed scores sit far below.
FINITE_FILL = -1e4

NAMES = ("output", "weights")


def dims(lead: tuple, n_q: int, n_k: int, d_k: int = 4, d_v: int = 6, mask: str = "none", **large) -> dict:
    """A case's shapes, Q (*lead, n_q, d_k), K (*lead, n_k, d_k), V (*lead, n_k, d_v), its kind of
    mask and, for large scores, ``scale`` (of Q and K) or ``shift`` (see :func:`shift_scores`)."""
    return {"lead": lead, "n_q": n_q, "n_k": n_k, "d_k": d_k, "d_v": d_v, "mask": mask, **large}


CASES = [
    Case("2-D Q (3, 4), K (5, 4), V (5, 6), no mask", 30, dims((), 3, 5), kind="2-D, no mask"),
    Case("a batch, n_q=3 queries and n_k=5 keys, no mask", 31, dims((2,), 3, 5), torch.float32,
         kind="3-D, no mask"),
    Case("4-D (batch, heads), a different mask per head", 32, dims((2, 3), 3, 5, mask="random"),
         kind="4-D, random mask"),
    Case("causal mask (5, 5)", 33, dims((2,), 5, 5, mask="causal"), kind="causal mask"),
    Case("padding mask (B, 1, n_k)", 34, dims((2,), 3, 5, mask="padding"), kind="padding mask"),
    Case("4-D, padding and causal mask", 35, dims((2, 3), 5, 5, mask="padding+causal"),
         kind="padding and causal mask"),
    Case("float32, scores of magnitude 1e4, padding mask", 36, dims((2,), 3, 5, mask="padding", scale=60.0),
         torch.float32, kind="scores of magnitude 1e4"),
    Case("every score near -1.25e5, far below -1e4, padding mask", 37,
         dims((2,), 3, 5, mask="padding", shift=1.25e5), kind="scores far below -1e4"),
]


def overflowed(where: str) -> CheckFailure:
    """The failure for inf or NaN on large scores (both sides word it so)."""
    return CheckFailure(f"scaled_dot_product_attention gives inf or NaN in {where}. Use a numerically "
                        "stable softmax (subtract the row maximum) and fill masked scores with -inf "
                        "before it.")


def shift_scores(Q: torch.Tensor, K: torch.Tensor, below: float) -> None:
    """Move every score down by about ``below`` (in place): feature 0 of every key set to -2 and
    of every query to below·sqrt(d_k)/2, so a row's allowed scores all sit far below a finite fill.
    The large number sits in Q, whose feature-0 gradient is a sum that cancels to 0."""
    if below:
        Q[..., 0], K[..., 0] = below * math.sqrt(Q.shape[-1]) / 2, -2.0


def inputs(case: Case, device):
    """Q, K, V (leaves) and the mask of a case."""
    p, g = case.params, generator(case.seed)
    scale = p.get("scale", 1.0)
    x = {"Q": randn((*p["lead"], p["n_q"], p["d_k"]), g, case.dtype, device, scale),
         "K": randn((*p["lead"], p["n_k"], p["d_k"]), g, case.dtype, device, scale),
         "V": randn((*p["lead"], p["n_k"], p["d_v"]), g, case.dtype, device)}
    shift_scores(x["Q"], x["K"], p.get("shift", 0.0))
    mask = case_mask(p["mask"], p["lead"], p["n_q"], p["n_k"], g)
    return {k: v.requires_grad_() for k, v in x.items()}, None if mask is None else mask.to(device)


def outputs(attend, case: Case, device):
    """Forward and backward of ``attend(Q, K, V, mask) -> (output, weights)`` on a case."""
    x, mask = inputs(case, device)
    return with_gradients(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, case.seed)


def pytorch_weights(Q, K, mask, **options):
    """softmax(QK^T * scale, masked) from F.scaled_dot_product_attention with identity values."""
    identity = torch.eye(K.shape[-2], dtype=K.dtype, device=K.device).expand(*K.shape[:-1], K.shape[-2])
    return F.scaled_dot_product_attention(Q, K, identity, attn_mask=mask, **options)


def pytorch_attention(Q, K, V, mask, **options):
    return (F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, **options),
            pytorch_weights(Q, K, mask, **options))


def _from_weights(weights_of):
    """A wrong attention whose weights are ``weights_of(Q, K, mask)``."""
    def attend(Q, K, V, mask):
        weights = weights_of(Q, K, mask)
        return torch.matmul(weights, V), weights  # the wrong weights applied to V
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


def _wrong(weights_of):
    """A known mistake's outputs on a case, its weights ``weights_of(Q, K, mask)``."""
    return lambda case, device: outputs(_from_weights(weights_of), case, device)


def _scaled(scale_of):
    """A known mistake's outputs on a case: the scores scaled by ``scale_of(case.params)``."""
    return lambda case, device: outputs(_from_weights(partial(pytorch_weights, scale=scale_of(case.params))),
                                        case, device)


class ScaledDotProductAttention(Exercise):
    forbidden = ATTENTION
    builds_on = {"softmax": softmax}  # "your softmax or PyTorch's": graded on a stable one
    name = "scaled_dot_product_attention"
    reference_name = "F.scaled_dot_product_attention"
    mistakes = {NO_SCALE: _scaled(lambda p: 1.0), SCALE_DK: _scaled(lambda p: 1 / p["d_k"]),
                SCALE_DV: _scaled(lambda p: 1 / math.sqrt(p["d_v"])),
                SCALE_N: _scaled(lambda p: 1 / math.sqrt(p["n_q"])),
                SOFTMAX_QUERIES: _wrong(_over_queries), MASK_INVERTED: _wrong(_inverted),
                MASK_AFTER_SOFTMAX: _wrong(_after_softmax), FILL_FINITE: _wrong(_filled(FINITE_FILL)),
                MASK_ZERO: _wrong(_filled(0.0))}
    visible_cases = CASES

    def run(self, impl, case, device):
        def learner(Q, K, V, mask):
            return expect_pair(self.call(case, impl, Q, K, V, mask=mask), self.name, case)

        return outputs(learner, case, device)

    def reference(self, case, device):
        return outputs(pytorch_attention, case, device)

    def evaluate(self, case, got, device):
        large = "scale" in case.params or "shift" in case.params
        if large and not all(torch.isfinite(t).all() for t in got.values()):
            raise overflowed(str(case))
        other = sorted({str(t.dtype).removeprefix("torch.") for k, t in got.items() if k in NAMES
                        and t.dtype != case.dtype})
        if other:
            raise CheckFailure(f"{self.name} returns {', '.join(other)} for inputs of "
                               f"{str(case.dtype).removeprefix('torch.')} in {case}: output and weights keep "
                               "the dtype of Q, K and V (no .float() or .double() inside).")
        if float32_inside(got, self.expected(case, device)):
            raise CheckFailure(f"{self.name} differs from {self.reference_name} in {case} by float32 "
                               f"rounding only (Q, K and V are float64 there).\n{FLOAT32_INSIDE.sentence()}",
                               FLOAT32_INSIDE)
        super().evaluate(case, got, device)


@visible_check
def check_scaled_dot_product_attention(scaled_dot_product_attention) -> None:
    """Against F.scaled_dot_product_attention: 2-D to 4-D, n_q != n_k, masks, large scores."""
    ScaledDotProductAttention().run_cases(scaled_dot_product_attention)
    passed("scaled_dot_product_attention matches PyTorch on 2-D to 4-D inputs, with every kind of mask; "
           "blocked pairs get weight 0 even when every score is far below -1e4.")
