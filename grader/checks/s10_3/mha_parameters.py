"""Hidden check of the ``mha_parameters`` prediction: the visible question, its answer recorded."""

from course.visible.s10_3.mha_parameters import MhaParameters
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedMhaParameters(MhaParameters, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
