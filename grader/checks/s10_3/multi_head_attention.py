"""Hidden check of ``MultiHeadAttention`` (defined in its visible module): its kinds again with other
sizes, in float64 and float32, another device, and no PyTorch attention."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_3.multi_head_attention import MultiHeadAttentionModule, dims
from grader.checks.exercise import GradedExercise, registered
from grader.checks.shared_references import reference_merge, reference_split

#: Grading's own, after the visible cases re-seeded.
CASES = [
    Case("self-attention, causal mask, 4 heads", 603, dims(2, 5, 5, 12, 4, "causal"), kind="causal mask"),
    Case("cross-attention, padding mask", 604, dims(3, 3, 5, 8, 2, "padding"), kind="padding mask"),
    Case("float32, causal mask", 607, dims(2, 5, 5, 12, 4, "causal"), torch.float32, kind="causal mask"),
]


@registered
class GradedMultiHeadAttention(MultiHeadAttentionModule, GradedExercise):
    #: Grading's own stand-ins (course.checking.pieces): a wrong split or merge costs its exercise alone.
    builds_on = {"split_heads": reference_split, "merge_heads": reference_merge}
    own_cases = CASES
