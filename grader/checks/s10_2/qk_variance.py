"""Hidden check of the ``qk_variance`` prediction: the visible question, its answer recorded."""

from course.visible.s10_2.qk_variance import QkVariance
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedQkVariance(QkVariance, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
