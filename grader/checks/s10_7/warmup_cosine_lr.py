"""Hidden check of ``warmup_cosine_lr`` (defined in its visible module): every step of more schedules
of its kinds against the contract's formula."""

from __future__ import annotations

from course.visible.s10_7.warmup_cosine_lr import WarmupCosineLr, schedule_case
from grader.checks.exercise import GradedExercise, registered

CASES = [  # name, peak_lr, warmup_steps, total_steps, min_lr (None: the default), steps checked
    schedule_case("warm-up 10, total 50, min_lr 1e-5", 1e-3, 10, 50, 1e-5, 60),
    schedule_case("warm-up 1, total 5", 0.1, 1, 5, 0.01, 8),
    schedule_case("no warm-up, total 20, min_lr left at its default", 3e-4, 0, 20, None, 25),
    schedule_case("warm-up 7, total 8 (one decay step)", 1.0, 7, 8, 0.5, 10),
    schedule_case("min_lr equal to peak_lr", 2e-3, 3, 9, 2e-3, 12),
    schedule_case("no warm-up, min_lr the int 0", 0.3, 0, 4, 0, 6),
    schedule_case("warm-up 2, total 6, min_lr the int 0", 0.5, 2, 6, 0, 9),
    schedule_case("warm-up 2, total 9, min_lr left at its default", 1e-2, 2, 9, None, 11),
    schedule_case("no warm-up, total 5, min_lr 0.02", 0.4, 0, 5, 0.02, 7),
    schedule_case("warm-up 3 = total 3, min_lr 1e-4, to step 5", 3e-3, 3, 3, 1e-4, 6),
]


@registered
class GradedWarmupCosineLr(WarmupCosineLr, GradedExercise):
    def cases(self):
        return CASES
