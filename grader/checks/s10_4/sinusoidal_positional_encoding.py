"""Hidden check of ``sinusoidal_positional_encoding``: against the formula evaluated in float64."""

from __future__ import annotations

import torch

from course.checking import angle_tolerance, compare_outputs
from course.visible.s10_4.sinusoidal_positional_encoding import (
    COS_COLUMN,
    EXPONENT_4I,
    EXPONENT_I,
    FROM_ONE,
    HALVES,
    INVERTED,
    SWAPPED,
    call_encoding,
    expect_float32_table,
    property_hint,
)
from grader.checks.common import encoding_table
from grader.checks.core import Case, Outputs, call_learner, expect_tensor
from grader.checks.exercise import Exercise, registered

FORMULA = "PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(the same angle)"
#: Each mistake as switches of :func:`grader.checks.common.encoding_table`.
SWITCHES = {SWAPPED: {"swap": True}, FROM_ONE: {"start": 1}, EXPONENT_I: {"exponent": "i/d"},
            EXPONENT_4I: {"exponent": "4i/d"}, COS_COLUMN: {"cos_column": True}, INVERTED: {"inverted": True},
            HALVES: {"halves": True}}
CASES = [  # max_len, d_model
    Case("max_len=6, d_model=8", 700, {"max_len": 6, "d_model": 8}, torch.float32),
    Case("odd d_model=7", 701, {"max_len": 9, "d_model": 7}, torch.float32),
    Case("odd d_model=3", 702, {"max_len": 5, "d_model": 3}, torch.float32),
    Case("one position", 703, {"max_len": 1, "d_model": 4}, torch.float32),
    Case("d_model=2 (one pair)", 704, {"max_len": 50, "d_model": 2}, torch.float32),
    Case("100 positions, d_model=64", 705, {"max_len": 100, "d_model": 64}, torch.float32),
    Case("2000 positions, odd d_model=17", 706, {"max_len": 2000, "d_model": 17}, torch.float32),
]


def _table(**switch):
    def run(case: Case, device: torch.device) -> Outputs:
        return {"pe": encoding_table(case.params["max_len"], case.params["d_model"], device, **switch)}
    return run


@registered
class SinusoidalPositionalEncoding(Exercise):
    name = "sinusoidal_positional_encoding"
    reference_name = "the formula evaluated in float64"
    mistakes = {mistake: _table(**switch) for mistake, switch in SWITCHES.items()}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        p = case.params
        out = call_encoding(lambda: call_learner(self.name, self.forbidden, case, impl, p["max_len"],
                                                 p["d_model"]), p["d_model"])
        return {"pe": expect_tensor(out, f"{self.name}'s result", case).detach().to(device)}

    def reference(self, case, device):
        return _table()(case, device)

    def evaluate(self, case, got, device):
        expect_float32_table(got["pe"], self.name, str(case))
        d_model = case.params["d_model"]
        compare_outputs(got, self.expected(case, device), self.name, str(case),
                       atol=angle_tolerance(case.params["max_len"]), against=f"the formula ({FORMULA})",
                       variants={m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()},
                       hint=lambda key, have: property_hint(have, d_model) or None)
