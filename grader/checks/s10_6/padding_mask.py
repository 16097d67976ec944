"""Hidden check of ``padding_mask`` (defined in its visible module): its cases, on the grading device
and on another (the engine's probe)."""

from __future__ import annotations

from course.visible.s10_6.padding_mask import PaddingMask
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedPaddingMask(PaddingMask, GradedExercise):
    """Nothing to add but the records and the device probe, which the engine runs."""
