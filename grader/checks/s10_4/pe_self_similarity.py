"""Hidden check of the ``pe_self_similarity`` prediction: the visible question, its answer recorded."""

from course.visible.s10_4.pe_self_similarity import PeSelfSimilarity
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedPeSelfSimilarity(PeSelfSimilarity, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
