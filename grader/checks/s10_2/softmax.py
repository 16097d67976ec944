"""Hidden check of ``softmax`` (defined in its visible module): its kinds again, another device,
and no softmax of PyTorch's."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_2.softmax import Softmax
from grader.checks.exercise import Exercise, registered
from grader.checks.tripwire import SOFTMAX

CASES = [
    Case("1-D, 7 logits", 200, {"shape": (7,), "dim": -1}, kind="1-D"),
    Case("3-D (2, 3, 5), dim=-1", 201, {"shape": (2, 3, 5), "dim": -1}, kind="3-D, last dim"),
    Case("3-D (2, 3, 5), dim=1", 202, {"shape": (2, 3, 5), "dim": 1}, kind="3-D, middle dim"),
    Case("4-D (2, 3, 4, 5), dim=0", 203, {"shape": (2, 3, 4, 5), "dim": 0}, kind="4-D, first dim"),
    Case("logits of magnitude 1e4", 204, {"shape": (2, 6), "dim": -1, "scale": 1e4},
         kind="logits of magnitude 1e4"),
    Case("float32, logits of magnitude 1e4", 205, {"shape": (3, 5), "dim": -1, "scale": 1e4}, torch.float32,
         kind="float32, logits of magnitude 1e4"),
    Case("float32, 3-D", 206, {"shape": (2, 3, 5), "dim": -1}, torch.float32, kind="3-D, last dim"),
]


@registered
class GradedSoftmax(Softmax, Exercise):
    forbidden = SOFTMAX

    def cases(self):
        return CASES
