"""Hidden check of ``padding_mask`` (defined in its visible module): its cases, on the grading device
and on another."""

from __future__ import annotations

import torch

from course.visible.s10_6.padding_mask import PaddingMask
from grader.checks.exercise import Exercise, check_device_independence, registered


@registered
class GradedPaddingMask(PaddingMask, Exercise):
    def extra_checks(self, impl, device):
        super().extra_checks(impl, device)
        check_device_independence(self.name,
                                  lambda dev: impl(torch.zeros(2, 5, dtype=torch.long, device=dev), 0))
