"""Hidden check of ``FeedForward`` (defined in its visible module): its kinds again, in float64 and
float32, dropout at another rate, and another device."""

from __future__ import annotations

import torch

from course.checking import Case
from course.checking.blocks import DROPPING
from course.visible.s10_5.feed_forward import FeedForwardModule, dims
from grader.checks.exercise import GradedExercise, registered

CASES = [
    Case("float64, relu, B=2, n=3, d_model=6, d_ff=10", 800, dims(2, 3, 6, 10, "relu"), kind="relu"),
    Case("float64, gelu, B=1, n=7, d_model=4, d_ff=16", 803, dims(1, 7, 4, 16, "gelu"), kind="gelu"),
    Case("float32, gelu", 804, dims(2, 5, 12, 20, "gelu"), torch.float32, kind="gelu"),
    Case("float32, relu", 805, dims(2, 5, 12, 20, "relu"), torch.float32, kind="relu"),
    Case("gelu, dropout=0.4 in train() mode", 806, dims(3, 5, 6, 6, "gelu", 0.4), kind=DROPPING),
]


@registered
class GradedFeedForward(FeedForwardModule, GradedExercise):
    own_cases = CASES
