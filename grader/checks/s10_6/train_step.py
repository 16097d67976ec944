"""Hidden check of ``train_step`` (defined in its visible module): the visible settings in float32 and
float64 and more settings, on the visible check's stand-in translator, on the grading device."""

from __future__ import annotations

import torch

from course.visible.s10_6.train_step import SETTINGS, Setting, TrainStep, trial_case
from grader.checks.exercise import GradedExercise, registered

MORE = [
    Setting("SGD with momentum, a warm-up scheduler, pad_id=4, label_smoothing=0.3, max_grad_norm=1.5, the "
            "model handed in eval() mode", "momentum", True, 4, 0.3, 1.5, True, 10),
    Setting("Adam, the defaults, the model handed in eval() mode", "adam", False, 0, 0.0, 1.0, True, 11,
            defaults=True),
    Setting("plain SGD, max_grad_norm=0.1, pad_id=6", "sgd", False, 6, 0.0, 0.1, False, 12),
    Setting("Adam with a scheduler, max_grad_norm=None, label_smoothing=0.1", "adam", True, 0, 0.1, None,
            False, 13),
]
CASES = [trial_case(s._replace(name=f"{s.name}, {dtype}"), 760 + i, dtype)
         for i, s in enumerate(SETTINGS) for dtype in (torch.float32, torch.float64)] + \
        [trial_case(s, 770 + i, torch.float64 if i % 2 else torch.float32) for i, s in enumerate(MORE)]


@registered
class GradedTrainStep(TrainStep, GradedExercise):
    def cases(self):
        return CASES
