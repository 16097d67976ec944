"""Hidden check of ``grouped_query_attention`` (defined in its visible module): the visible kinds
again with other head counts and sizes, in float64 where the visible side has float32, and no
PyTorch attention."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_8.grouped_query_attention import GroupedQueryAttention, dims
from grader.checks.exercise import GradedExercise, registered

#: Grading's own, after the visible cases re-seeded (every dimension differs).
CASES = [
    Case("h=8, g=2, one batch row, no mask", 801, dims(1, 8, 2, 4, 6, d_k=8, d_v=3), kind="grouped, no mask"),
    Case("h=6, g=2, a random mask per query head", 802, dims(3, 6, 2, 2, 7, mask="random"),
         kind="grouped, per-head mask"),
    Case("h=8, g=4, one mask per query head for the whole batch", 803, dims(2, 8, 4, 4, 5, mask="heads"),
         kind="per-head mask without a batch axis"),
    Case("h=6, g=1 (multi-query), padding and causal mask", 804, dims(2, 6, 1, 4, 4, mask="padding+causal"),
         kind="multi-query, causal mask"),
    Case("h=2, g=2 (multi-head), padding mask", 805, dims(2, 2, 2, 3, 4, mask="padding"),
         kind="multi-head, padding mask"),
    Case("float32, h=6, g=3, a random mask per query head", 806, dims(2, 6, 3, 4, 6, mask="random"),
         torch.float32, kind="float32"),
    Case("h=6, g=3, every score near -1.25e5, causal mask", 807,
         dims(2, 6, 3, 4, 4, mask="causal", shift=1.25e5),
         kind="scores far below -1e4"),
]


@registered
class GradedGroupedQueryAttention(GroupedQueryAttention, GradedExercise):
    own_cases = CASES
