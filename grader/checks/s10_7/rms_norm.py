"""Hidden check of ``RMSNorm`` (defined in its visible module): its kinds again, mostly in float64,
and no RMSNorm of PyTorch's."""

from __future__ import annotations

import torch

from course.visible.s10_7.rms_norm import RMSNormModule, norm_case, runs_in
from grader.checks.exercise import GradedExercise, registered

CASES = [  # name, seed, shape of x, eps (None: the default), dtype, scale of x
    norm_case("2-D x (4, 6)", 800, (4, 6)),
    norm_case("3-D x (2, 3, 5)", 801, (2, 3, 5)),
    norm_case("4-D x (2, 2, 3, 4), eps=0.5", 802, (2, 2, 3, 4), 0.5),
    norm_case("small x (about 1e-3)", 804, (2, 3, 6), scale=1e-3),
    norm_case("d_model=1", 805, (3, 1), 1e-3),
    norm_case("float32, 3-D x", 820, (2, 4, 8), dtype=torch.float32),
    norm_case("float32, small x, eps=1e-4", 821, (3, 8), 1e-4, torch.float32, 1e-2),
    norm_case("bfloat16, 3-D x", 830, (2, 4, 16), dtype=torch.bfloat16),
    norm_case("float16, 2-D x, eps=1e-5", 831, (5, 8), 1e-5, torch.float16),
]


@registered
class GradedRMSNorm(RMSNormModule, GradedExercise):

    own_cases = CASES

    def cases(self):
        """The visible cases re-seeded, then grading's own: those of a dtype this device runs."""
        return [case for case in GradedExercise.cases(self) if runs_in(case.dtype)]
