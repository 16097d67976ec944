"""Hidden check of ``causal_mask`` (defined in its visible module): its cases, on the grading device."""

from course.visible.s10_6.causal_mask import CausalMask
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedCausalMask(CausalMask, GradedExercise):
    pass
