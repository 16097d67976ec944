"""Hidden check of the ``cached_positions`` prediction: the visible question, its answer recorded."""

from course.visible.s10_8.cached_positions import CachedPositions
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedCachedPositions(CachedPositions, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
