"""Hidden checks for 10.1 Self-attention: Q, K, V.

References: ``nn.Linear(bias=False)`` with the learner's (seeded) weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.checks.core import Case, Mistake, Outputs, call_learner, expect_tuple, generator, randn
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    forward_backward,
    load_parameters,
    seeded_parameters,
)
from grader.checks.tripwire import LINEAR

QKV = ("Q", "K", "V")

# Every dimension differs, so a swapped axis cannot hide: n=3, d=5, d_k=4, d_v=6.
SHAPES = [
    ("2-D X (n=3, d=5)", (), 3, 5, 4, 6),
    ("3-D X (batch 2)", (2,), 3, 5, 4, 6),
    ("4-D X (2, 3 leading dims)", (2, 3), 4, 5, 2, 7),
    ("d_k equal to d", (2,), 3, 5, 5, 6),
]


def _cases() -> list[Case]:
    cases = []
    for i, (name, lead, n, d, d_k, d_v) in enumerate(SHAPES):
        params = {"lead": lead, "n": n, "d": d, "d_k": d_k, "d_v": d_v}
        cases.append(Case(name, seed=100 + i, params=params))
    float32 = {"lead": (2,), "n": 3, "d": 5, "d_k": 4, "d_v": 6}
    cases.append(Case("float32, batch 2", seed=150, params=float32, dtype=torch.float32))
    return cases


def _inputs(case: Case, device: torch.device) -> dict[str, torch.Tensor]:
    """X and the three weight matrices of a case, as leaves that collect gradients."""
    p, g = case.params, generator(case.seed)
    shapes = {"X": (*p["lead"], p["n"], p["d"]), "W_q": (p["d"], p["d_k"]),
              "W_k": (p["d"], p["d_k"]), "W_v": (p["d"], p["d_v"])}
    return {k: randn(s, g, case.dtype, device).requires_grad_() for k, s in shapes.items()}


def _linear_reference(x: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Q, K, V from nn.Linear(bias=False) layers holding W^T (nn.Linear stores (out, in))."""
    return tuple(F.linear(x["X"], x[w].T) for w in ("W_q", "W_k", "W_v"))


def _swapped_qk(case: Case, device: torch.device) -> Outputs:
    x = _inputs(case, device)
    return forward_backward(lambda: (x["X"] @ x["W_k"], x["X"] @ x["W_q"], x["X"] @ x["W_v"]),
                            QKV, x, case.seed)


class QKVProjections(Exercise):
    name = "qkv_projections"
    forbidden = LINEAR
    mistakes = {
        "swapped": Mistake("W_q and W_k swapped (Q computed with W_k)",
                           "Q = X @ W_q, K = X @ W_k, V = X @ W_v.", _swapped_qk),
    }

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        x = _inputs(case, device)

        def call():
            out = call_learner(self.name, self.forbidden, case, impl, x["X"], x["W_q"], x["W_k"], x["W_v"])
            return expect_tuple(out, QKV, self.name, case)

        return forward_backward(call, QKV, x, case.seed)

    def reference(self, case, device):
        x = _inputs(case, device)
        return forward_backward(lambda: _linear_reference(x), QKV, x, case.seed)

    def extra_checks(self, impl, device):
        def on(dev):
            x = {k: v.detach().to(dev) for k, v in _inputs(self.cases()[1], torch.device("cpu")).items()}
            impl(x["X"], x["W_q"], x["W_k"], x["W_v"])

        check_device_independence(self.name, on)


MODULE_HOW = ("Create self.w_q and self.w_k = nn.Linear(d_model, d_k, bias=False) and "
              "self.w_v = nn.Linear(d_model, d_v, bias=False), in that order.")


def _module_shapes(p) -> dict[str, tuple[int, int]]:
    return {"w_q.weight": (p["d_k"], p["d"]), "w_k.weight": (p["d_k"], p["d"]),
            "w_v.weight": (p["d_v"], p["d"])}


def _module_inputs(case: Case, device: torch.device):
    p = case.params
    weights = seeded_parameters(_module_shapes(p), case, device)
    x = randn((*p["lead"], p["n"], p["d"]), generator(case.seed), case.dtype, device)
    return x.requires_grad_(), weights


class QKVProjectionModule(Exercise):
    name = "QKVProjection"

    def cases(self):
        return [c for c in _cases() if len(c.params["lead"]) == 1]

    def run(self, impl, case, device):
        p = case.params
        module = build_module(self.name, self.forbidden, case, impl, p["d"], p["d_k"], p["d_v"])
        x, weights = _module_inputs(case, device)
        params = load_parameters(module.to(device), weights, self.name, MODULE_HOW)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x)
            return expect_tuple(out, QKV, f"{self.name}.forward", case)

        return forward_backward(call, QKV, {"x": x, **params}, case.seed)

    def reference(self, case, device):
        p = case.params
        x, weights = _module_inputs(case, device)
        layers = {}
        for name, (d_out, d_in) in _module_shapes(p).items():
            layer = torch.nn.Linear(d_in, d_out, bias=False).to(device, case.dtype)
            with torch.no_grad():
                layer.weight.copy_(weights[name])
            layers[name] = layer
        leaves = {"x": x, **{n: layer.weight for n, layer in layers.items()}}
        return forward_backward(lambda: tuple(layer(x) for layer in layers.values()), QKV, leaves,
                                case.seed)

    def extra_checks(self, impl, device):
        def on(dev):
            module = impl(5, 4, 6).to(dev)
            module(torch.zeros(2, 3, 5, device=dev))

        check_device_independence(self.name, on)


qkv_projections = QKVProjections()
qkv_projection_module = QKVProjectionModule()
EXERCISES = [qkv_projections, qkv_projection_module]
check_qkv_projections = qkv_projections.check
check_QKVProjection = qkv_projection_module.check
