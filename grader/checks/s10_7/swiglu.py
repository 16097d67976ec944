"""Hidden check of ``SwiGLU``: against ``w2(F.silu(w1 x) * w3 x)`` with the same (seeded) weights."""

from __future__ import annotations

import torch

from course.visible.s10_7.swiglu import (
    ACTIVATIONS,
    AGAINST,
    case_inputs,
    expect_layout,
    learner_outputs,
    reference_outputs,
)
from grader.checks.exercise import Exercise, build_module, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner

SHAPES = [  # name, d_model, d_ff, x's leading dims
    ("2-D x (4, 6), d_ff 9", 6, 9, (4,)),
    ("3-D x (2, 5, 4), d_ff 4", 4, 4, (2, 5)),
    ("4-D x (2, 3, 2, 5), d_ff 12", 5, 12, (2, 3, 2)),
    ("d_model 1, d_ff 3", 1, 3, (3, 2)),
]


def _cases() -> list[Case]:
    out = [Case(name, 940 + i, {"dims": (d, d_ff, lead)}) for i, (name, d, d_ff, lead) in enumerate(SHAPES)]
    return [*out, Case("float32, 3-D x (3, 4, 8), d_ff 16", 950, {"dims": (8, 16, (3, 4))}, torch.float32)]


def _inputs(case: Case, device):
    return case_inputs(*case.params["dims"], case.dtype, case.seed, device)


@registered
class SwiGLUModule(Exercise):
    name = "SwiGLU"
    reference_name = AGAINST
    mistakes = {m: (lambda case, device, g=gate: reference_outputs(*_inputs(case, device), case.seed, g))
                for m, gate in ACTIVATIONS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        d_model, d_ff, _ = case.params["dims"]
        module = build_module(self.name, self.forbidden, case, impl, d_model, d_ff)
        expect_layout(module, d_model, d_ff)

        def watched(what, where, fn, *args):
            return call_learner(self.name, self.forbidden, case, fn, *args)

        return learner_outputs(module.to(device), *_inputs(case, device), str(case), case.seed, watched)

    def reference(self, case, device):
        return reference_outputs(*_inputs(case, device), case.seed)

    def extra_checks(self, impl, device):
        module, x = impl(4, 6), torch.ones(2, 3, 4)  # made outside: only forward's new tensors go to 'meta'
        check_unplaced_tensors(self.name, lambda: module(x))
