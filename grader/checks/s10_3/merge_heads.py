"""Hidden check of ``merge_heads``: against a transpose back and a reshape to (B, n, h * d_h)."""

from __future__ import annotations

from course.visible.s10_3.merge_heads import NO_TRANSPOSE
from grader.checks.common import reference_merge
from grader.checks.core import call_learner, expect_tensor
from grader.checks.exercise import Exercise, registered
from grader.checks.s10_3.heads import CASES, merge_with


@registered
class MergeHeads(Exercise):
    name = "merge_heads"
    mistakes = {NO_TRANSPOSE: lambda c, d: merge_with(lambda x: x.reshape(x.shape[0], x.shape[2], -1), c, d)}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(x):
            return expect_tensor(call_learner(self.name, self.forbidden, case, impl, x),
                                 "merge_heads's result", case)
        return merge_with(learner, case, device)

    def reference(self, case, device):
        return merge_with(reference_merge, case, device)
