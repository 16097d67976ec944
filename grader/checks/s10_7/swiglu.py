"""Hidden check of ``SwiGLU`` (defined in its visible module): its kinds again with other sizes, in
float64 and float32, and another device."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_7.swiglu import SwiGLUModule, dims
from grader.checks.exercise import GradedExercise, registered

CASES = [
    Case("2-D x (4, 6), d_ff 9", 940, dims(6, 9, (4,)), kind="2-D x"),
    Case("3-D x (2, 5, 4), d_ff 4", 941, dims(4, 4, (2, 5)), kind="3-D x"),
    Case("4-D x (2, 3, 2, 5), d_ff 12", 942, dims(5, 12, (2, 3, 2)), kind="4-D x"),
    Case("d_model 1, d_ff 3", 943, dims(1, 3, (3, 2)), kind="d_model 1"),
    Case("float32, 3-D x (3, 4, 8), d_ff 16", 950, dims(8, 16, (3, 4)), torch.float32, kind="3-D x"),
]


@registered
class GradedSwiGLU(SwiGLUModule, GradedExercise):
    def cases(self):
        return CASES
