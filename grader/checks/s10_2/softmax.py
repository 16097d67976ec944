"""Hidden check of ``softmax`` (defined in its visible module): its kinds again, another device,
and no softmax of PyTorch's."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_2.softmax import Softmax
from grader.checks.exercise import GradedExercise, registered

#: Grading's own, beyond the visible cases re-seeded.
OWN_CASES = [Case("float32, 3-D", 206, {"shape": (2, 3, 5), "dim": -1}, torch.float32, kind="3-D, last dim")]


@registered
class GradedSoftmax(Softmax, GradedExercise):
    own_cases = OWN_CASES
