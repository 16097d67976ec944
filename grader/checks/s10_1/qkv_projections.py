"""Hidden check of ``qkv_projections``: against ``F.linear`` (what nn.Linear(bias=False) computes)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course.visible.s10_1.qkv_projections import K_FROM_Q, QKV, SWAPPED
from grader.checks.core import Case, Outputs, call_learner, expect_tuple, generator, randn
from grader.checks.exercise import Exercise, check_device_independence, forward_backward, registered
from grader.checks.s10_1.cases import cases
from grader.checks.tripwire import LINEAR


def _inputs(case: Case, device: torch.device) -> dict[str, torch.Tensor]:
    """X and the three weight matrices of a case, as leaves that collect gradients."""
    p, g = case.params, generator(case.seed)
    shapes = {"X": (*p["lead"], p["n"], p["d"]), "W_q": (p["d"], p["d_k"]),
              "W_k": (p["d"], p["d_k"]), "W_v": (p["d"], p["d_v"])}
    return {k: randn(s, g, case.dtype, device).requires_grad_() for k, s in shapes.items()}


def _through_linear(case: Case, device: torch.device, order=("W_q", "W_k", "W_v")) -> Outputs:
    """Q, K, V from F.linear with W^T (nn.Linear stores (out, in)), weights in the order given."""
    x = _inputs(case, device)
    return forward_backward(lambda: tuple(F.linear(x["X"], x[w].T) for w in order), QKV, x, case.seed)


@registered
class QKVProjections(Exercise):
    name = "qkv_projections"
    forbidden = LINEAR
    mistakes = {SWAPPED: lambda case, device: _through_linear(case, device, ("W_k", "W_q", "W_v")),
                K_FROM_Q: lambda case, device: _through_linear(case, device, ("W_q", "W_q", "W_v"))}

    def cases(self):
        return cases()

    def run(self, impl, case, device):
        x = _inputs(case, device)

        def call():
            out = call_learner(self.name, self.forbidden, case, impl, x["X"], x["W_q"], x["W_k"], x["W_v"])
            return expect_tuple(out, QKV, self.name, case)

        return forward_backward(call, QKV, x, case.seed)

    def reference(self, case, device):
        return _through_linear(case, device)

    def extra_checks(self, impl, device):
        def on(dev):
            x = {k: v.detach().to(dev) for k, v in _inputs(self.cases()[1], torch.device("cpu")).items()}
            impl(x["X"], x["W_q"], x["W_k"], x["W_v"])

        check_device_independence(self.name, on)
