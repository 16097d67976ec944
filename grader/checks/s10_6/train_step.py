"""Hidden check of ``train_step``: two calls per setting on the visible check's stand-in translator,
against the contract's step (``F.cross_entropy``, ``clip_grad_norm_``) on the same model built
again from its seed; more settings, float64 and float32, the grading device, and new tensors
without a device."""

from __future__ import annotations

import torch

from course.visible.s10_6.train_step import SETTINGS, VARIANTS, Setting, build, expected, learner_outputs
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner

MORE = [
    Setting("SGD with momentum, a warm-up scheduler, pad_id=4, label_smoothing=0.3, max_grad_norm=1.5, the "
            "model handed in eval() mode", "momentum", True, 4, 0.3, 1.5, True, 10),
    Setting("Adam, the defaults, the model handed in eval() mode", "adam", False, 0, 0.0, 1.0, True, 11,
            defaults=True),
    Setting("plain SGD, max_grad_norm=0.1, pad_id=6", "sgd", False, 6, 0.0, 0.1, False, 12),
    Setting("Adam with a scheduler, max_grad_norm=None, label_smoothing=0.1", "adam", True, 0, 0.1, None,
            False, 13),
]


def _cases() -> list[Case]:
    visible = [Case(f"{s.name}, {dtype}", 760 + i, {"setting": s}, dtype)
               for i, s in enumerate(SETTINGS) for dtype in (torch.float32, torch.float64)]
    return visible + [Case(s.name, 770 + i, {"setting": s}, torch.float64 if i % 2 else torch.float32)
                      for i, s in enumerate(MORE)]


@registered
class TrainStep(Exercise):
    name = "train_step"
    reference_name = "the contract's step (F.cross_entropy, clip_grad_norm_) on the same model"
    mistakes = {m: (lambda case, device, change=change: expected(case.params["setting"], case.dtype, device,
                                                                 change)) for m, change in VARIANTS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        def call(*args, **kwargs):
            return call_learner(self.name, self.forbidden, case, impl, *args, **kwargs)

        return learner_outputs(call, case.params["setting"], case.dtype, device, str(case))

    def reference(self, case, device):
        return expected(case.params["setting"], case.dtype, device)

    def extra_checks(self, impl, device):
        trial = build(SETTINGS[1], torch.float32, torch.device("cpu"))
        src, tgt = trial.batches[0]
        options = trial.options()
        check_unplaced_tensors(self.name, lambda: impl(trial.model, src, tgt, trial.optimizer, **options))
