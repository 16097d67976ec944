"""Hidden check of ``warmup_cosine_lr``: every step of more schedules against the contract's formula."""

from __future__ import annotations

from course.visible.s10_7.warmup_cosine_lr import SWITCHES, expected_schedule, learner, schedule
from grader.checks.exercise import Exercise, registered
from grader.checks.guarded_calls import Case

SCHEDULES = [  # name, peak_lr, warmup_steps, total_steps, min_lr (None: the default), steps checked
    ("warm-up 10, total 50, min_lr 1e-5", 1e-3, 10, 50, 1e-5, 60),
    ("warm-up 1, total 5", 0.1, 1, 5, 0.01, 8),
    ("no warm-up, total 20, min_lr left at its default", 3e-4, 0, 20, None, 25),
    ("warm-up 7, total 8 (one decay step)", 1.0, 7, 8, 0.5, 10),
    ("min_lr equal to peak_lr", 2e-3, 3, 9, 2e-3, 12),
    ("no warm-up, min_lr the int 0", 0.3, 0, 4, 0, 6),
]


@registered
class WarmupCosineLr(Exercise):
    name = "warmup_cosine_lr"
    reference_name = "the contract's formula"
    mistakes = {m: (lambda case, device, c=c: {"output": expected_schedule(*case.params["schedule"], **c)
                                               .to(device)}) for m, c in SWITCHES.items()}

    def cases(self):
        return [Case(name, 0, {"schedule": schedule_}) for name, *schedule_ in SCHEDULES]

    def run(self, impl, case, device):
        return {"output": schedule(learner(impl, str(case)), *case.params["schedule"], str(case)).to(device)}

    def reference(self, case, device):
        return {"output": expected_schedule(*case.params["schedule"]).to(device)}
