"""Hidden check of ``qkv_projections`` (defined in its visible module): more shapes in float64,
another device, and no F.linear."""

from __future__ import annotations

from course.visible.s10_1.qkv_projections import QKVProjections
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_1.cases import cases


@registered
class GradedQKVProjections(QKVProjections, GradedExercise):
    #: Grading's own shapes (its "d_k equal to d" is the visible case's, re-seeded).
    own_cases = [case for case in cases() if case.kind != "d_k equal to d"]
