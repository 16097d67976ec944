"""Hidden check of ``dot_product_variance`` (defined in its visible module): other sizes, more samples."""

from __future__ import annotations

from course.visible.s10_2.dot_product_variance import DotProductVariance, cases
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedDotProductVariance(DotProductVariance, GradedExercise):
    def cases(self):
        return cases((4, 64, 512), 20_000, 400)
