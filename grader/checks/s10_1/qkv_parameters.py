"""Hidden check of the ``qkv_parameters`` prediction: the visible question, its answer recorded."""

from course.visible.s10_1.qkv_parameters import QkvParameters
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedQkvParameters(QkvParameters, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
