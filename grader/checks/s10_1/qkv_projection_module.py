"""Hidden check of ``QKVProjection``: against three nn.Linear(bias=False) layers holding its weights."""

from __future__ import annotations

import torch

from course.visible.s10_1.qkv_projection_module import HOW, QKV
from grader.checks.core import Case, call_learner, expect_tuple, generator, randn
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    forward_backward,
    load_parameters,
    registered,
    seeded_parameters,
)
from grader.checks.s10_1.cases import cases


def _shapes(p) -> dict[str, tuple[int, int]]:
    return {"w_q.weight": (p["d_k"], p["d"]), "w_k.weight": (p["d_k"], p["d"]),
            "w_v.weight": (p["d_v"], p["d"])}


def _inputs(case: Case, device: torch.device):
    p = case.params
    weights = seeded_parameters(_shapes(p), case, device)
    x = randn((*p["lead"], p["n"], p["d"]), generator(case.seed), case.dtype, device)
    return x.requires_grad_(), weights


@registered
class QKVProjectionModule(Exercise):
    name = "QKVProjection"

    def cases(self):
        return [c for c in cases() if len(c.params["lead"]) == 1]

    def run(self, impl, case, device):
        p = case.params
        module = build_module(self.name, self.forbidden, case, impl, p["d"], p["d_k"], p["d_v"])
        x, weights = _inputs(case, device)
        params = load_parameters(module.to(device), weights, self.name, HOW)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x)
            return expect_tuple(out, QKV, f"{self.name}.forward", case)

        return forward_backward(call, QKV, {"x": x, **params}, case.seed)

    def reference(self, case, device):
        x, weights = _inputs(case, device)
        layers = {}
        for name, (d_out, d_in) in _shapes(case.params).items():
            layer = torch.nn.Linear(d_in, d_out, bias=False).to(device, case.dtype)
            with torch.no_grad():
                layer.weight.copy_(weights[name])
            layers[name] = layer
        leaves = {"x": x, **{n: layer.weight for n, layer in layers.items()}}
        return forward_backward(lambda: tuple(layer(x) for layer in layers.values()), QKV, leaves, case.seed)

    def extra_checks(self, impl, device):
        def on(dev):
            module = impl(5, 4, 6).to(dev)
            module(torch.zeros(2, 3, 5, device=dev))

        check_device_independence(self.name, on)
