"""Hidden check of ``merge_heads`` (defined in its visible module): its cases, against a transpose back and
a reshape to (B, n, h * d_h) (``course.checking.pieces``, which also stands in for the learner's
merge_heads while MultiHeadAttention is checked)."""

from __future__ import annotations

from course import checking
from course.visible.s10_3.merge_heads import MergeHeads
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_3.heads import CASES
from grader.checks.shared_references import reference_merge


@registered
class GradedMergeHeads(MergeHeads, GradedExercise):
    reference_name = "the PyTorch reference"
    own_cases = CASES

    def evaluate(self, case, got, device):
        """The visible check's comparisons first (its words), then the reference's, gradient too."""
        super().evaluate(case, got, device)
        checking.Exercise.evaluate(self, case, got, device)

    def reference(self, case, device):
        return self.outputs(reference_merge, case, device)
