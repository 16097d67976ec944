"""Hidden check of ``lm_loss`` (defined in its visible module): its kinds again, mostly in float64,
and no loss or softmax of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_7.lm_loss import LmLoss, loss_case
from grader.checks.exercise import GradedExercise, registered

CASES = [  # name, seed, B, n, V, pad_id, padded positions of row 0, label_smoothing, dtype, logit scale
    loss_case("no padding, no smoothing", 700, 2, 4, 5, 0, 0, 0.0),
    loss_case("padding at the end of row 0", 701, 3, 5, 7, 0, 2, 0.0),
    loss_case("label_smoothing=0.1, pad_id=4", 702, 2, 6, 9, 4, 3, 0.1),
    loss_case("label_smoothing=0.3, pad_id the last id", 703, 4, 3, 6, 5, 1, 0.3, scale=2.0),
    loss_case("one sentence, V=2", 704, 1, 5, 2, 1, 2, 0.2),
    loss_case("float32, label_smoothing=0.1", 720, 3, 4, 8, 0, 2, 0.1, torch.float32),
    loss_case("float32, logits of about 80", 721, 2, 3, 6, 2, 1, 0.1, torch.float32, 80.0),
    loss_case("float32, logits of about 80, no smoothing", 722, 2, 4, 5, 0, 1, 0.0, torch.float32, 80.0),
    loss_case("pad_id=-100", 705, 3, 4, 7, -100, 2, 0.0),
    loss_case("pad_id=12, beyond V=9, label_smoothing=0.2", 706, 2, 6, 9, 12, 3, 0.2),
]


@registered
class GradedLmLoss(LmLoss, GradedExercise):

    def cases(self):
        return CASES
