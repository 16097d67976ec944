"""Hidden check of ``split_heads``: against a view to (B, n, h, d_h) and a transpose."""

from __future__ import annotations

from course.visible.s10_3.split_heads import NO_TRANSPOSE
from grader.checks.common import reference_split
from grader.checks.core import call_learner, expect_tensor
from grader.checks.exercise import Exercise, registered
from grader.checks.s10_3.heads import CASES, split_with


@registered
class SplitHeads(Exercise):
    name = "split_heads"
    mistakes = {NO_TRANSPOSE: lambda c, d: split_with(
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), c, d)}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(x, h):
            return expect_tensor(call_learner(self.name, self.forbidden, case, impl, x, h),
                                 "split_heads's result", case)
        return split_with(learner, case, device)

    def reference(self, case, device):
        return split_with(reference_split, case, device)
