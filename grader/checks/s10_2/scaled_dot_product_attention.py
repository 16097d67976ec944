"""Hidden check of ``scaled_dot_product_attention`` (defined in its visible module): more shapes
and masks in float64, another device, and no PyTorch attention."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_2.scaled_dot_product_attention import ScaledDotProductAttention, dims
from grader.checks.exercise import GradedExercise, registered

#: Grading's own, after the visible cases re-seeded (every dimension differs).
CASES = [
    Case("3-D, n_q=3, n_k=5, no mask", 301, dims((2,), 3, 5), kind="3-D, no mask"),
    Case("4-D (batch, heads), no mask", 302, dims((2, 3), 3, 5), kind="3-D, no mask"),
    Case("3-D, random mask", 303, dims((2,), 3, 5, mask="random"), kind="4-D, random mask"),
    Case("3-D, logits of magnitude 1e4", 308, dims((2,), 3, 5, mask="random", scale=60.0),
         kind="scores of magnitude 1e4"),
    Case("float32, 4-D, causal mask", 309, dims((2, 3), 5, 5, mask="causal"), torch.float32,
         kind="causal mask"),
    Case("4-D, every score near -1.25e5, far below -1e4, padding and causal mask", 311,
         dims((2, 3), 5, 5, mask="padding+causal", shift=1.25e5), kind="scores far below -1e4"),
]


@registered
class GradedScaledDotProductAttention(ScaledDotProductAttention, GradedExercise):
    own_cases = CASES
