"""Hidden check of ``TransformerBlock`` (defined in its visible module): its kinds again with other
sizes, in float64 and float32, dropout at another rate, another device, and no multi-head attention of
PyTorch's."""

from __future__ import annotations

import torch

from course.checking import Case
from course.checking.blocks import DROPPING
from course.visible.s10_5.transformer_block import TransformerBlockModule, dims
from grader.checks.exercise import GradedExercise, registered

#: Grading's own, after the visible cases re-seeded.
CASES = [
    Case("float64, post-norm, relu, no mask", 820, dims(2, 5, 12, 4, 20, "relu", False),
         kind="post-norm, no mask"),
    Case("float64, pre-norm, gelu, padding and causal mask", 824,
         dims(2, 6, 12, 3, 16, "gelu", True, "padding+causal"), kind="pre-norm, padding and causal mask"),
    Case("float32, post-norm, gelu, causal mask", 826, dims(2, 6, 12, 4, 20, "gelu", False, "causal"),
         torch.float32, kind="post-norm, causal mask"),
    Case("float32, pre-norm, relu, padding mask", 827, dims(3, 5, 12, 4, 20, "relu", True, "padding"),
         torch.float32, kind="pre-norm, padding mask"),
    Case("pre-norm, relu, padding mask, dropout=0.4 in train() mode", 828,
         dims(3, 5, 8, 2, 12, "relu", True, "padding", 0.4), kind=DROPPING),
]


@registered
class GradedTransformerBlock(TransformerBlockModule, GradedExercise):
    own_cases = CASES
