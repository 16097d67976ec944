"""Hidden check of the ``most_weights`` prediction: the visible question, its answer recorded."""

from course.visible.s10_5.most_weights import MostWeights
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedMostWeights(MostWeights, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
