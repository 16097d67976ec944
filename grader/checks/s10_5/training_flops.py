"""Hidden check of the ``training_flops`` prediction: the visible question, its answer recorded."""

from course.visible.s10_5.training_flops import TrainingFlops
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedTrainingFlops(TrainingFlops, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
