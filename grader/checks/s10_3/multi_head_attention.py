"""Hidden check of ``MultiHeadAttention`` (defined in its visible module): its kinds again with other
sizes, in float64 and float32, another device, and no PyTorch attention."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_3.multi_head_attention import MultiHeadAttentionModule, dims
from grader.checks.exercise import GradedExercise, registered

CASES = [
    Case("self-attention, B=2, n=3, d_model=12, h=4", 600, dims(2, 3, 3, 12, 4), kind="self-attention"),
    Case("cross-attention, n_q=3, n_k=5", 601, dims(2, 3, 5, 12, 4), kind="cross-attention"),
    Case("cross-attention, bias=False", 602, dims(2, 3, 5, 12, 3, bias=False), kind="bias=False"),
    Case("self-attention, causal mask", 603, dims(2, 5, 5, 12, 4, "causal"), kind="causal mask"),
    Case("cross-attention, padding mask", 604, dims(3, 3, 5, 8, 2, "padding"), kind="padding mask"),
    Case("padding and causal mask", 605, dims(2, 5, 5, 12, 3, "padding+causal"),
         kind="padding and causal mask"),
    Case("one head", 606, dims(2, 3, 5, 6, 1, "random"), kind="one head"),
    Case("float32, causal mask", 607, dims(2, 5, 5, 12, 4, "causal"), torch.float32, kind="causal mask"),
]


@registered
class GradedMultiHeadAttention(MultiHeadAttentionModule, GradedExercise):

    def cases(self):
        return CASES
