"""Hidden check of the ``uniform_loss`` prediction: the visible question, its answer recorded."""

from course.visible.s10_7.uniform_loss import UniformLoss
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedUniformLoss(UniformLoss, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
