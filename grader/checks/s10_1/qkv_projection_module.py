"""Hidden check of ``QKVProjection`` (defined in its visible module): more cases, another device."""

from __future__ import annotations

import torch

from course.visible.s10_1.qkv_projection_module import QKVProjectionModule
from grader.checks.exercise import Exercise, check_device_independence, registered
from grader.checks.s10_1.cases import cases


@registered
class GradedQKVProjectionModule(QKVProjectionModule, Exercise):
    def cases(self):
        return [c for c in cases() if len(c.params["lead"]) == 1]

    def extra_checks(self, impl, device):
        super().extra_checks(impl, device)

        def on(dev):
            impl(5, 4, 6).to(dev)(torch.zeros(2, 3, 5, device=dev))

        check_device_independence(self.name, on)
