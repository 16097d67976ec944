"""Hidden checks for 10.2 Scaled dot-product attention.

References: ``torch.softmax``; ``F.scaled_dot_product_attention`` for the output and the
softmax of the masked, scaled scores for the weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course.compare import VARIANCE_RTOL
from grader.checks.common import attention_weights, case_mask
from grader.checks.core import (
    Case,
    CheckFailure,
    Mistake,
    Outputs,
    call_learner,
    expect_tensor,
    expect_tuple,
    generator,
    randn,
)
from grader.checks.exercise import Exercise, check_device_independence, forward_backward
from grader.checks.tripwire import ATTENTION, SOFTMAX

# ---------------------------------------------------------------- softmax

SOFTMAX_CASES = [
    Case("1-D, 7 logits", 200, {"shape": (7,), "dim": -1}),
    Case("3-D (2, 3, 5), dim=-1", 201, {"shape": (2, 3, 5), "dim": -1}),
    Case("3-D (2, 3, 5), dim=1", 202, {"shape": (2, 3, 5), "dim": 1}),
    Case("4-D (2, 3, 4, 5), dim=0", 203, {"shape": (2, 3, 4, 5), "dim": 0}),
    Case("logits of magnitude 1e4", 204, {"shape": (2, 6), "dim": -1, "scale": 1e4}),
    Case("float32, logits of magnitude 1e4", 205, {"shape": (3, 5), "dim": -1, "scale": 1e4},
         dtype=torch.float32),
    Case("float32, 3-D", 206, {"shape": (2, 3, 5), "dim": -1}, dtype=torch.float32),
]


def _logits(case: Case, device: torch.device) -> torch.Tensor:
    p = case.params
    return randn(p["shape"], generator(case.seed), case.dtype, device, p.get("scale", 1.0)).requires_grad_()


def _softmax_of(fn, case: Case, device: torch.device) -> Outputs:
    x = _logits(case, device)
    return forward_backward(lambda: (fn(x, case.params["dim"]),), ("output",), {"x": x}, case.seed)


def _naive_softmax(x, dim):
    e = x.exp()
    return e / e.sum(dim, keepdim=True)


class Softmax(Exercise):
    name = "softmax"
    forbidden = SOFTMAX
    mistakes = {
        "last_axis": Mistake("a softmax over the last axis whatever dim says",
                             "Use the dim argument in max, sum and keepdim=True.",
                             lambda c, d: _softmax_of(lambda x, dim: torch.softmax(x, -1), c, d)),
        "first_axis": Mistake("a softmax over the first axis (dim=0)",
                              "Use the dim argument in max, sum and keepdim=True.",
                              lambda c, d: _softmax_of(lambda x, dim: torch.softmax(x, 0), c, d)),
    }

    def cases(self):
        return SOFTMAX_CASES

    def run(self, impl, case, device):
        def learner(x, dim):
            out = call_learner(self.name, self.forbidden, case, impl, x, dim=dim)
            return expect_tensor(out, "softmax's result", case)

        return _softmax_of(learner, case, device)

    def reference(self, case, device):
        return _softmax_of(torch.softmax, case, device)

    def evaluate(self, case, got, device):
        if "scale" in case.params and not all(torch.isfinite(t).all() for t in got.values()):
            raise CheckFailure(
                f"softmax gives inf or NaN in {case}. exp overflows for large logits: subtract "
                "the maximum along dim first (softmax(x) = softmax(x - max(x)))."
            )
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        check_device_independence(self.name, lambda dev: impl(torch.zeros(2, 3, device=dev), dim=-1))


# ---------------------------------------------------------------- attention

NAMES = ("output", "weights")


ATTENTION_SHAPES = {  # lead, n_q, n_k, d_k, d_v: every dimension differs
    "2-D": ((), 3, 5, 4, 6),
    "3-D": ((2,), 3, 5, 4, 6),
    "4-D": ((2, 3), 3, 5, 4, 6),
    "square": ((2,), 5, 5, 4, 6),
    "4-D square": ((2, 3), 5, 5, 4, 6),
}

ATTENTION_CASES = [
    Case("2-D Q, K, V, no mask", 300, {"shape": "2-D", "mask": "none"}),
    Case("3-D, n_q=3, n_k=5, no mask", 301, {"shape": "3-D", "mask": "none"}),
    Case("4-D (batch, heads), no mask", 302, {"shape": "4-D", "mask": "none"}),
    Case("3-D, random mask", 303, {"shape": "3-D", "mask": "random"}),
    Case("4-D, random mask", 304, {"shape": "4-D", "mask": "random"}),
    Case("3-D, causal mask", 305, {"shape": "square", "mask": "causal"}),
    Case("3-D, padding mask", 306, {"shape": "3-D", "mask": "padding"}),
    Case("4-D, padding and causal mask", 307, {"shape": "4-D square", "mask": "padding+causal"}),
    Case("3-D, logits of magnitude 1e4", 308, {"shape": "3-D", "mask": "random", "scale": 60.0}),
    Case("float32, 4-D, causal mask", 309, {"shape": "4-D square", "mask": "causal"},
         dtype=torch.float32),
    Case("float32, logits of magnitude 1e4", 310, {"shape": "3-D", "mask": "padding", "scale": 60.0},
         dtype=torch.float32),
]


def attention_inputs(case: Case, device: torch.device):
    """Q, K, V (leaves) and the mask of a case."""
    lead, n_q, n_k, d_k, d_v = ATTENTION_SHAPES[case.params["shape"]]
    g, scale = generator(case.seed), case.params.get("scale", 1.0)
    x = {"Q": randn((*lead, n_q, d_k), g, case.dtype, device, scale),
         "K": randn((*lead, n_k, d_k), g, case.dtype, device, scale),
         "V": randn((*lead, n_k, d_v), g, case.dtype, device)}
    mask = case_mask(case.params["mask"], lead, n_q, n_k, g)
    return {k: v.requires_grad_() for k, v in x.items()}, None if mask is None else mask.to(device)


def _attention_outputs(case, device, attend) -> Outputs:
    """Forward and backward of ``attend(Q, K, V, mask) -> (output, weights)`` on a case."""
    x, mask = attention_inputs(case, device)
    return forward_backward(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, case.seed)


def _variant(weights_fn):
    """A mistake whose weights come from ``weights_fn(Q, K, mask)``."""
    def run(case, device):
        def attend(Q, K, V, mask):
            w = weights_fn(Q, K, mask)
            return w @ V, w
        return _attention_outputs(case, device, attend)
    return run


def _mask_after_softmax(Q, K, mask):
    w = attention_weights(Q, K, None)
    return w if mask is None else w * mask


def _inverted(Q, K, mask):
    if mask is None:
        return attention_weights(Q, K, None)
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(mask, float("-inf"))
    return torch.softmax(scores, -1)


ATTENTION_MISTAKES = {
    "no_scale": Mistake("attention without the 1/sqrt(d_k) scaling",
                        "Divide the scores QK^T by sqrt(d_k) before the softmax.",
                        _variant(lambda Q, K, m: attention_weights(Q, K, m, scale=1.0))),
    "scale_dk": Mistake("scaling by d_k instead of sqrt(d_k)",
                        "The scale is 1/sqrt(d_k): math.sqrt(Q.shape[-1]).",
                        _variant(lambda Q, K, m: attention_weights(Q, K, m, scale=1 / Q.shape[-1]))),
    "softmax_queries": Mistake("a softmax over the query axis (dim=-2)",
                               "Each query's weights over the keys sum to 1: softmax over dim=-1.",
                               _variant(lambda Q, K, m: attention_weights(Q, K, m, dim=-2))),
    "mask_inverted": Mistake("the mask inverted",
                             "True means *may attend*: fill the scores where the mask is False "
                             "(scores.masked_fill(~mask, float('-inf'))).", _variant(_inverted)),
    "mask_after_softmax": Mistake("the mask applied after the softmax",
                                  "Mask the scores before the softmax, so the visible keys' "
                                  "weights still sum to 1.", _variant(_mask_after_softmax)),
    "mask_zero": Mistake("masked scores set to 0 instead of -inf",
                         "A score of 0 still gets weight exp(0); use float('-inf').",
                         _variant(lambda Q, K, m: attention_weights(Q, K, m, fill=0.0))),
}


def _reference_attention(Q, K, V, mask):
    output = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    return output, attention_weights(Q, K, mask)


class ScaledDotProductAttention(Exercise):
    name = "scaled_dot_product_attention"
    forbidden = ATTENTION
    mistakes = ATTENTION_MISTAKES

    def cases(self):
        return ATTENTION_CASES

    def run(self, impl, case, device):
        def learner(Q, K, V, mask):
            out = call_learner(self.name, self.forbidden, case, impl, Q, K, V, mask=mask)
            return expect_tuple(out, NAMES, self.name, case)

        return _attention_outputs(case, device, learner)

    def reference(self, case, device):
        return _attention_outputs(case, device, _reference_attention)

    def evaluate(self, case, got, device):
        if "scale" in case.params and not all(torch.isfinite(t).all() for t in got.values()):
            raise CheckFailure(
                f"{self.name} gives inf or NaN in {case}. Use a numerically stable softmax "
                "(subtract the row maximum) and fill masked scores with -inf before it."
            )
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        def on(dev):
            Q, K = torch.zeros(2, 3, 4, device=dev), torch.zeros(2, 5, 4, device=dev)
            impl(Q, K, torch.zeros(2, 5, 6, device=dev),
                 mask=torch.ones(3, 5, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)


# ---------------------------------------------------------------- the sqrt(d_k) experiment

VARIANCE_CASES = [Case(f"d_k={d_k}, scaled={scaled}", 400 + d_k, {"d_k": d_k, "scaled": scaled})
                  for d_k in (4, 64, 512) for scaled in (False, True)]
RELATIVE_TOLERANCE = VARIANCE_RTOL  # the visible check's too


class DotProductVariance(Exercise):
    """A statistical property, not a reference comparison: var(q.k) is d_k, or 1 once scaled."""

    name = "dot_product_variance"
    reference_name = "theory (a variance of d_k, or 1 once scaled)"

    def cases(self):
        return VARIANCE_CASES

    def run(self, impl, case, device):
        value = call_learner(self.name, self.forbidden, case, impl, case.params["d_k"],
                             num_samples=20_000, scaled=case.params["scaled"])
        try:
            return {"variance": torch.as_tensor(float(value), dtype=torch.float64)}
        except (TypeError, ValueError):
            raise CheckFailure(f"{self.name} should return a number; got {type(value).__name__}.") from None

    def reference(self, case, device):
        return {"variance": torch.tensor(1.0 if case.params["scaled"] else float(case.params["d_k"]))}

    def evaluate(self, case, got, device):
        want = float(self.expected(case, device)["variance"])
        have = float(got["variance"])
        if not abs(have - want) <= RELATIVE_TOLERANCE * want:
            hint = ("Divide each dot product by sqrt(d_k)." if case.params["scaled"]
                    else "Draw q and k with independent standard normal entries (torch.randn) "
                         "and take the variance of their dot products.")
            raise CheckFailure(f"{self.name} in {case}: got a variance of {have:.3g}, which is not "
                               f"within {RELATIVE_TOLERANCE:.0%} of what theory predicts. {hint}")


softmax = Softmax()
attention = ScaledDotProductAttention()
variance = DotProductVariance()
EXERCISES = [softmax, attention, variance]
check_softmax = softmax.check
check_scaled_dot_product_attention = attention.check
check_dot_product_variance = variance.check
