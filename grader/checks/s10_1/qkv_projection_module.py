"""Hidden check of ``QKVProjection`` (defined in its visible module): more cases, another device."""

from __future__ import annotations

from course.visible.s10_1.qkv_projection_module import QKVProjectionModule
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_1.cases import cases


@registered
class GradedQKVProjectionModule(QKVProjectionModule, GradedExercise):
    def cases(self):
        return [c for c in cases() if len(c.params["lead"]) == 1]
