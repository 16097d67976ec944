"""Hidden check of ``dot_product_variance``: a statistical property, not a reference comparison."""

from __future__ import annotations

import torch

from course.checking import VARIANCE_RTOL, CheckFailure
from course.visible.s10_2.dot_product_variance import SCALED_HINT, UNSCALED_HINT, as_number, within_theory
from grader.checks.core import Case, call_learner
from grader.checks.exercise import Exercise, registered

CASES = [Case(f"d_k={d_k}, scaled={scaled}", 400 + d_k, {"d_k": d_k, "scaled": scaled})
         for d_k in (4, 64, 512) for scaled in (False, True)]


@registered
class DotProductVariance(Exercise):
    """var(q.k) is d_k, or 1 once scaled: judged within the visible check's tolerance."""

    name = "dot_product_variance"
    reference_name = "theory (a variance of d_k, or 1 once scaled)"

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        value = call_learner(self.name, self.forbidden, case, impl, case.params["d_k"],
                             num_samples=20_000, scaled=case.params["scaled"])
        return {"variance": torch.tensor(as_number(value), dtype=torch.float64)}

    def reference(self, case, device):
        return {"variance": torch.tensor(1.0 if case.params["scaled"] else float(case.params["d_k"]))}

    def evaluate(self, case, got, device):
        have, scaled = float(got["variance"]), case.params["scaled"]
        if not within_theory(have, case.params["d_k"], scaled):
            raise CheckFailure(f"{self.name} in {case}: got a variance of {have:.3g}, which is not within "
                               f"{VARIANCE_RTOL:.0%} of what theory predicts. "
                               f"{SCALED_HINT if scaled else UNSCALED_HINT}")
