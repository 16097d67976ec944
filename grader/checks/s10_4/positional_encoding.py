"""Hidden check of ``PositionalEncoding`` (defined in its visible module): its kinds again in float64
and float32, against the float64 table only grading holds, every mistake of the table, another device."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import torch

from course.checking import Case, generator, randn, with_gradients
from course.visible.s10_4.positional_encoding import PositionalEncodingModule, cases
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_4.sinusoidal_positional_encoding import SWITCHES
from grader.checks.shared_references import encoding_table, reference_sinusoidal_positional_encoding


def _added(case: Case, device: torch.device, **switch):
    """x + the float64 table[:n] (with a mistake's ``switch``), with the gradient of x."""
    x = randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()
    _, n, d = case.params["dims"]
    pe = encoding_table(n, d, device, **switch).to(case.dtype)
    return with_gradients(lambda: (x + pe,), ("output",), {"x": x}, case.seed)


@registered
class GradedPositionalEncoding(PositionalEncodingModule, GradedExercise):
    builds_on = {"sinusoidal_positional_encoding": reference_sinusoidal_positional_encoding}  # pieces.py
    reference_name = "the formula evaluated in float64"
    mistakes = {**PositionalEncodingModule.mistakes,
                **{m: partial(_added, **switch) for m, switch in SWITCHES.items()}}
    #: After the visible cases re-seeded: those in float32 again in float64, and another size.
    own_cases = [*(replace(c, name=f"{c.name}, float64") for c in cases(720)[:3]),
                 Case("float32, B=2, n=9, d_model=12", 724, {"dims": (2, 9, 12), "max_len": 20},
                      torch.float32, kind="max_len given")]

    def reference(self, case, device):
        return _added(case, device)
