"""Hidden check of ``causal_mask``: against ``torch.ones(n, n, dtype=torch.bool).tril()``."""

from __future__ import annotations

import torch

from course.checking.standins import expect_bool_mask
from course.visible.s10_6.causal_mask import WRONG
from grader.checks.exercise import Exercise, registered
from grader.checks.guarded_calls import Case, CheckFailure, Outputs, call_learner, expect_tensor

CASES = [Case(f"n={n}", 700 + n, {"n": n}) for n in (5, 2, 7, 1)]  # n=1 last: ambiguous


def _with(fn, case: Case) -> Outputs:
    """A mask as float64 0/1, so the usual comparison and records apply."""
    return {"mask": fn(case.params["n"]).to(torch.float64)}


@registered
class CausalMask(Exercise):
    name = "causal_mask"
    reference_name = "torch.ones(n, n, dtype=torch.bool).tril()"
    mistakes = {m: (lambda c, d, wrong=wrong: _with(wrong, c)) for m, wrong in WRONG.items()}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(n):
            return expect_bool_mask(call_learner(self.name, self.forbidden, case, impl, n, device=device),
                                    "causal_mask's result", str(case))
        return _with(learner, case)

    def reference(self, case, device):
        return _with(lambda n: torch.ones(n, n, dtype=torch.bool, device=device).tril(), case)

    def extra_checks(self, impl, device):
        for where in (torch.device("meta"), "meta"):
            mask = call_learner(self.name, self.forbidden, CASES[0], impl, 5, device=where)
            if expect_tensor(mask, "causal_mask's result", CASES[0]).device.type != "meta":
                raise CheckFailure(
                    f"causal_mask(5, device={where!r}) returned a tensor on {mask.device}: create "
                    "the mask on the device you are given (torch.ones(n, n, dtype=torch.bool, "
                    "device=device)).")
