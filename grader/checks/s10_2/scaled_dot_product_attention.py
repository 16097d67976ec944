"""Hidden check of ``scaled_dot_product_attention``: the output against
``F.scaled_dot_product_attention``, the weights against the softmax of the masked, scaled scores."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from course.visible.s10_2.scaled_dot_product_attention import (
    FILL_FINITE,
    FINITE_FILL,
    MASK_AFTER_SOFTMAX,
    MASK_INVERTED,
    MASK_ZERO,
    NAMES,
    NO_SCALE,
    SCALE_DK,
    SOFTMAX_QUERIES,
    overflowed,
    shift_scores,
)
from grader.checks.common import attention_weights, case_mask
from grader.checks.core import Case, Outputs, call_learner, expect_tuple, generator, randn
from grader.checks.exercise import Exercise, check_device_independence, forward_backward, registered
from grader.checks.tripwire import ATTENTION

SHAPES = {  # lead, n_q, n_k, d_k, d_v: every dimension differs
    "2-D": ((), 3, 5, 4, 6),
    "3-D": ((2,), 3, 5, 4, 6),
    "4-D": ((2, 3), 3, 5, 4, 6),
    "square": ((2,), 5, 5, 4, 6),
    "4-D square": ((2, 3), 5, 5, 4, 6),
}

CASES = [
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
    Case("4-D, every score near -1.25e5, far below -1e4, padding and causal mask", 311,
         {"shape": "4-D square", "mask": "padding+causal", "shift": 1.25e5}),
]


def attention_inputs(case: Case, device: torch.device):
    """Q, K, V (leaves) and the mask of a case."""
    lead, n_q, n_k, d_k, d_v = SHAPES[case.params["shape"]]
    g, scale = generator(case.seed), case.params.get("scale", 1.0)
    x = {"Q": randn((*lead, n_q, d_k), g, case.dtype, device, scale),
         "K": randn((*lead, n_k, d_k), g, case.dtype, device, scale),
         "V": randn((*lead, n_k, d_v), g, case.dtype, device)}
    shift_scores(x["Q"], x["K"], case.params.get("shift", 0.0))
    mask = case_mask(case.params["mask"], lead, n_q, n_k, g)
    return {k: v.requires_grad_() for k, v in x.items()}, None if mask is None else mask.to(device)


def _outputs(case, device, attend) -> Outputs:
    """Forward and backward of ``attend(Q, K, V, mask) -> (output, weights)`` on a case."""
    x, mask = attention_inputs(case, device)
    return forward_backward(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, case.seed)


def _variant(weights_fn):
    """A mistake whose weights come from ``weights_fn(Q, K, mask)``."""
    def run(case, device):
        def attend(Q, K, V, mask):
            w = weights_fn(Q, K, mask)
            return w @ V, w
        return _outputs(case, device, attend)
    return run


def _mask_after_softmax(Q, K, mask):
    w = attention_weights(Q, K, None)
    return w if mask is None else w * mask


def _inverted(Q, K, mask):
    if mask is None:
        return attention_weights(Q, K, None)
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(mask, float("-inf"))
    return torch.softmax(scores, -1)


def _reference(Q, K, V, mask):
    output = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    return output, attention_weights(Q, K, mask)


@registered
class ScaledDotProductAttention(Exercise):
    name = "scaled_dot_product_attention"
    forbidden = ATTENTION
    mistakes = {
        NO_SCALE: _variant(lambda Q, K, m: attention_weights(Q, K, m, scale=1.0)),
        SCALE_DK: _variant(lambda Q, K, m: attention_weights(Q, K, m, scale=1 / Q.shape[-1])),
        SOFTMAX_QUERIES: _variant(lambda Q, K, m: attention_weights(Q, K, m, dim=-2)),
        MASK_INVERTED: _variant(_inverted),
        MASK_AFTER_SOFTMAX: _variant(_mask_after_softmax),
        FILL_FINITE: _variant(lambda Q, K, m: attention_weights(Q, K, m, fill=FINITE_FILL)),
        MASK_ZERO: _variant(lambda Q, K, m: attention_weights(Q, K, m, fill=0.0)),
    }

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(Q, K, V, mask):
            out = call_learner(self.name, self.forbidden, case, impl, Q, K, V, mask=mask)
            return expect_tuple(out, NAMES, self.name, case)

        return _outputs(case, device, learner)

    def reference(self, case, device):
        return _outputs(case, device, _reference)

    def evaluate(self, case, got, device):
        large = "scale" in case.params or "shift" in case.params
        if large and not all(torch.isfinite(t).all() for t in got.values()):
            raise overflowed(str(case))
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        def on(dev):
            Q, K = torch.zeros(2, 3, 4, device=dev), torch.zeros(2, 5, 4, device=dev)
            impl(Q, K, torch.zeros(2, 5, 6, device=dev), mask=torch.ones(3, 5, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)
