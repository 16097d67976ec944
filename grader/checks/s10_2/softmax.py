"""Hidden check of ``softmax``: against ``torch.softmax``."""

from __future__ import annotations

import torch

from course.visible.s10_2.softmax import FIRST_AXIS, LAST_AXIS, overflowed
from grader.checks.core import Case, Outputs, call_learner, expect_tensor, generator, randn
from grader.checks.exercise import Exercise, check_device_independence, forward_backward, registered
from grader.checks.tripwire import SOFTMAX

CASES = [
    Case("1-D, 7 logits", 200, {"shape": (7,), "dim": -1}),
    Case("3-D (2, 3, 5), dim=-1", 201, {"shape": (2, 3, 5), "dim": -1}),
    Case("3-D (2, 3, 5), dim=1", 202, {"shape": (2, 3, 5), "dim": 1}),
    Case("4-D (2, 3, 4, 5), dim=0", 203, {"shape": (2, 3, 4, 5), "dim": 0}),
    Case("logits of magnitude 1e4", 204, {"shape": (2, 6), "dim": -1, "scale": 1e4}),
    Case("float32, logits of magnitude 1e4", 205, {"shape": (3, 5), "dim": -1, "scale": 1e4},
         dtype=torch.float32),
    Case("float32, 3-D", 206, {"shape": (2, 3, 5), "dim": -1}, dtype=torch.float32),
]


def _softmax_of(fn, case: Case, device: torch.device) -> Outputs:
    p = case.params
    x = randn(p["shape"], generator(case.seed), case.dtype, device, p.get("scale", 1.0)).requires_grad_()
    return forward_backward(lambda: (fn(x, p["dim"]),), ("output",), {"x": x}, case.seed)


@registered
class Softmax(Exercise):
    name = "softmax"
    forbidden = SOFTMAX
    mistakes = {
        LAST_AXIS: lambda c, d: _softmax_of(lambda x, dim: torch.softmax(x, -1), c, d),
        FIRST_AXIS: lambda c, d: _softmax_of(lambda x, dim: torch.softmax(x, 0), c, d),
    }

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(x, dim):
            out = call_learner(self.name, self.forbidden, case, impl, x, dim=dim)
            return expect_tensor(out, "softmax's result", case)

        return _softmax_of(learner, case, device)

    def reference(self, case, device):
        return _softmax_of(torch.softmax, case, device)

    def evaluate(self, case, got, device):
        if "scale" in case.params and not all(torch.isfinite(t).all() for t in got.values()):
            raise overflowed(str(case))
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        check_device_independence(self.name, lambda dev: impl(torch.zeros(2, 3, device=dev), dim=-1))
