"""Hidden check of ``PositionalEncoding``: x + the formula's table, its buffer, dropout, the ValueError."""

from __future__ import annotations

import math

import torch

from course.checking import angle_tolerance, compare_outputs
from course.visible.s10_4.positional_encoding import AGAINST, SCALED, TOO_LONG, expect_buffer, expect_dropout
from grader.checks.common import encoding_table
from grader.checks.core import Case, Outputs, call_learner, expect_tensor, generator, randn
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    expect_value_error,
    forward_backward,
    registered,
)
from grader.checks.s10_4.sinusoidal_positional_encoding import SWITCHES

CASES = [  # B, n, d_model, max_len (None: the default 5000)
    Case("B=2, n=5, d_model=8, max_len=12", 720, {"dims": (2, 5, 8), "max_len": 12}),
    Case("n equal to max_len", 721, {"dims": (3, 7, 6), "max_len": 7}),
    Case("odd d_model=5, default max_len", 722, {"dims": (2, 4, 5), "max_len": None}),
    Case("one position", 723, {"dims": (2, 1, 4), "max_len": 3}),
    Case("float32, B=2, n=9, d_model=12", 724, {"dims": (2, 9, 12), "max_len": 20}, torch.float32),
]


def _added(case: Case, device: torch.device, scale: float = 1.0, **switch) -> Outputs:
    """x * scale + table[:n] (the table with ``switch``) with its input gradient."""
    x = randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()
    _, n, d = case.params["dims"]
    pe = encoding_table(n, d, device, **switch).to(case.dtype)
    return forward_backward(lambda: (x * scale + pe,), ("output",), {"x": x}, case.seed)


def _scaled(case: Case, device: torch.device) -> Outputs:
    return _added(case, device, scale=math.sqrt(case.params["dims"][2]))


@registered
class PositionalEncodingModule(Exercise):
    name = "PositionalEncoding"
    reference_name = "the formula evaluated in float64"
    mistakes = {SCALED: _scaled, **{m: (lambda case, device, s=switch: _added(case, device, **s))
                                    for m, switch in SWITCHES.items()}}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        d, max_len = case.params["dims"][2], case.params["max_len"]
        args = (d,) if max_len is None else (d, max_len)
        module = build_module(self.name, self.forbidden, case, impl, *args)
        expect_buffer(module, 5000 if max_len is None else max_len, d)
        module = module.to(device)
        x = randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x)
            return (expect_tensor(out, f"{self.name}.forward's result", case),)

        return forward_backward(call, ("output",), {"x": x}, case.seed)

    def reference(self, case, device):
        return _added(case, device)

    def evaluate(self, case, got, device):
        compare_outputs(got, self.expected(case, device), self.name, str(case),
                       atol=angle_tolerance(case.params["dims"][1]), against=AGAINST,
                       variants={m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()})

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, max_len=6)(torch.zeros(2, 7, 8)), TOO_LONG)
        case = Case("d_model=8, max_len=50, dropout=0.5", 729, {}, torch.float32)
        expect_dropout(lambda: build_module(self.name, self.forbidden, case, impl, 8, max_len=50,
                                            dropout=0.5),
                       lambda where, module, x: call_learner(self.name, self.forbidden, case, module, x),
                       encoding_table(50, 8, torch.device("cpu")))

        def on(dev):
            module = impl(8, max_len=20).to(dev)
            module(torch.zeros(2, 5, 8, device=dev))

        check_device_independence(self.name, on)
