"""Hidden check of ``scaled_dot_product_attention`` (defined in its visible module): more shapes
and masks in float64, another device, and no PyTorch attention."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_2.scaled_dot_product_attention import ScaledDotProductAttention, dims
from grader.checks.exercise import GradedExercise, registered

CASES = [  # every dimension differs
    Case("2-D Q, K, V, no mask", 300, dims((), 3, 5), kind="2-D, no mask"),
    Case("3-D, n_q=3, n_k=5, no mask", 301, dims((2,), 3, 5), kind="3-D, no mask"),
    Case("4-D (batch, heads), no mask", 302, dims((2, 3), 3, 5), kind="3-D, no mask"),
    Case("3-D, random mask", 303, dims((2,), 3, 5, mask="random"), kind="4-D, random mask"),
    Case("4-D, random mask", 304, dims((2, 3), 3, 5, mask="random"), kind="4-D, random mask"),
    Case("3-D, causal mask", 305, dims((2,), 5, 5, mask="causal"), kind="causal mask"),
    Case("3-D, padding mask", 306, dims((2,), 3, 5, mask="padding"), kind="padding mask"),
    Case("4-D, padding and causal mask", 307, dims((2, 3), 5, 5, mask="padding+causal"),
         kind="padding and causal mask"),
    Case("3-D, logits of magnitude 1e4", 308, dims((2,), 3, 5, mask="random", scale=60.0),
         kind="scores of magnitude 1e4"),
    Case("float32, 4-D, causal mask", 309, dims((2, 3), 5, 5, mask="causal"), torch.float32,
         kind="causal mask"),
    Case("float32, logits of magnitude 1e4", 310, dims((2,), 3, 5, mask="padding", scale=60.0), torch.float32,
         kind="scores of magnitude 1e4"),
    Case("4-D, every score near -1.25e5, far below -1e4, padding and causal mask", 311,
         dims((2, 3), 5, 5, mask="padding+causal", shift=1.25e5), kind="scores far below -1e4"),
]


@registered
class GradedScaledDotProductAttention(ScaledDotProductAttention, GradedExercise):

    def cases(self):
        return CASES
