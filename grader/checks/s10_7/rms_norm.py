"""Hidden check of ``RMSNorm``: against ``nn.RMSNorm`` with the same (seeded) weight."""

from __future__ import annotations

from functools import partial

import torch

from course.checking import CheckFailure
from course.visible.s10_7.rms_norm import (
    HOW,
    VARIANTS,
    expect_full_precision,
    learner_forward,
    outputs,
    reference_norm,
)
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_unplaced_tensors,
    load_parameters,
    registered,
)
from grader.checks.guarded_calls import Case, call_learner, expect_tensor, generator, randn
from grader.checks.tripwire import RMS_NORM

SHAPES = [  # name, shape of x, eps (None: the default), scale of x
    ("2-D x (4, 6)", (4, 6), None, 1.0),
    ("3-D x (2, 3, 5)", (2, 3, 5), None, 1.0),
    ("4-D x (2, 2, 3, 4), eps=0.5", (2, 2, 3, 4), 0.5, 1.0),
    ("large x (about 100)", (3, 7), None, 100.0),
    ("small x (about 1e-3)", (2, 3, 6), None, 1e-3),
    ("d_model=1", (3, 1), 1e-3, 1.0),
]


def _cases() -> list[Case]:
    out = [Case(name, 800 + i, {"shape": shape, "eps": eps, "scale": scale})
           for i, (name, shape, eps, scale) in enumerate(SHAPES)]
    out += [Case("float32, 3-D x", 820, {"shape": (2, 4, 8), "eps": None, "scale": 1.0}, torch.float32),
            Case("float32, small x, eps=1e-4", 821, {"shape": (3, 8), "eps": 1e-4, "scale": 1e-2},
                 torch.float32)]
    return out


def _eps(case: Case) -> float:
    return 1e-6 if case.params["eps"] is None else case.params["eps"]


def _inputs(case: Case, device):
    p, g = case.params, generator(case.seed)
    x = randn(p["shape"], g, case.dtype, device, p["scale"])
    weight = randn(p["shape"][-1:], g, case.dtype, device, 0.5) + 1
    return x, weight


def _variant(f):
    def run(case, device):
        x, weight = _inputs(case, device)
        w = weight.requires_grad_()
        return outputs(lambda t: f(t, w, _eps(case)), w, x, case.seed)
    return run


@registered
class RMSNormModule(Exercise):
    name = "RMSNorm"
    reference_name = "nn.RMSNorm with the same weight"
    forbidden = RMS_NORM
    mistakes = {m: _variant(f) for m, f in VARIANTS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        d = case.params["shape"][-1]
        args = (d,) if case.params["eps"] is None else (d, case.params["eps"])
        module = build_module(self.name, self.forbidden, case, impl, *args).to(device)
        start = dict(module.named_parameters()).get("weight")
        if start is not None and tuple(start.shape) == (d,) and not bool((start == 1).all()):
            raise CheckFailure(f"RMSNorm({d}).weight should start as ones, as nn.RMSNorm's. {HOW}")
        x, weight = _inputs(case, device)
        params = load_parameters(module, {"weight": weight}, self.name, HOW)
        forward = learner_forward(module, str(case))

        def watched(t):
            out = call_learner(self.name, self.forbidden, case, forward, t)
            return expect_tensor(out, f"{self.name}.forward", case)

        got = outputs(watched, params["weight"], x, case.seed)
        variants = {m: partial(run, case, device) for m, run in self.mistakes.items()}
        expect_full_precision(got, self.expected(case, device), str(case), variants)
        return got

    def reference(self, case, device):
        x, weight = _inputs(case, device)
        norm = reference_norm(x.shape[-1], _eps(case), weight)
        return outputs(norm, norm.weight, x, case.seed)

    def extra_checks(self, impl, device):
        module, x = impl(6), torch.ones(2, 3, 6)  # made outside: only forward's new tensors go to 'meta'
        check_unplaced_tensors(self.name, lambda: module(x))
