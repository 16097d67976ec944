"""Hidden check of ``qkv_projections`` (defined in its visible module): more shapes in float64,
another device, and no F.linear."""

from __future__ import annotations

import torch

from course.visible.s10_1.qkv_projections import QKVProjections, inputs
from grader.checks.exercise import Exercise, check_device_independence, registered
from grader.checks.s10_1.cases import cases


@registered
class GradedQKVProjections(QKVProjections, Exercise):

    def cases(self):
        return cases()

    def extra_checks(self, impl, device):
        super().extra_checks(impl, device)
        x = [t.detach() for t in inputs(self.cases()[1], torch.device("cpu")).values()]
        check_device_independence(self.name, lambda dev: impl(*(t.to(dev) for t in x)))
