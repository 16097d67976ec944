"""Hidden check of ``merge_heads`` (defined in its visible module): its cases, against a transpose
back and a reshape to (B, n, h * d_h), which only grading holds."""

from __future__ import annotations

from course import checking
from course.visible.s10_3.merge_heads import MergeHeads
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_3.heads import CASES
from grader.checks.shared_references import reference_merge


@registered
class GradedMergeHeads(MergeHeads, GradedExercise):
    reference_name = "the PyTorch reference"
    evaluate = checking.Exercise.evaluate  # against the reference, output and gradient at once

    def cases(self):
        return CASES

    def reference(self, case, device):
        return self.outputs(reference_merge, case, device)
