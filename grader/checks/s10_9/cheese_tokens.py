"""Hidden check of the ``cheese_tokens`` prediction: the visible question, its answer recorded."""

from course.visible.s10_9.cheese_tokens import CheeseTokens
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedCheeseTokens(CheeseTokens, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
