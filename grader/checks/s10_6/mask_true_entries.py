"""Hidden check of the ``mask_true_entries`` prediction: the visible question, its answer recorded."""

from course.visible.s10_6.mask_true_entries import MaskTrueEntries
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedMaskTrueEntries(MaskTrueEntries, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
