"""Hidden check of ``sinusoidal_positional_encoding`` (defined in its visible module): every entry
against the formula evaluated in float64 as a table, which only grading holds."""

from __future__ import annotations

from course.checking import angle_tolerance, compare_outputs
from course.visible.s10_4.sinusoidal_positional_encoding import (
    COS_COLUMN,
    EXPONENT_4I,
    EXPONENT_I,
    FORMULA,
    FROM_ONE,
    HALVES,
    INVERTED,
    SWAPPED,
    SinusoidalPositionalEncoding,
    expect_float32_table,
    property_hint,
)
from grader.checks.exercise import GradedExercise, registered
from grader.checks.shared_references import encoding_table

#: Each mistake as switches of :func:`grader.checks.shared_references.encoding_table`.
SWITCHES = {SWAPPED: {"swap": True}, FROM_ONE: {"start": 1}, EXPONENT_I: {"exponent": "i/d"},
            EXPONENT_4I: {"exponent": "4i/d"}, COS_COLUMN: {"cos_column": True}, INVERTED: {"inverted": True},
            HALVES: {"halves": True}}


def _table(**switch):
    return lambda case, device: {"pe": encoding_table(case.params["max_len"], case.params["d_model"], device,
                                                      **switch)}


@registered
class GradedSinusoidalPositionalEncoding(SinusoidalPositionalEncoding, GradedExercise):
    mistakes = {mistake: _table(**switch) for mistake, switch in SWITCHES.items()}

    def reference(self, case, device):
        return _table()(case, device)

    def evaluate(self, case, got, device):
        max_len, d_model = case.params["max_len"], case.params["d_model"]
        what = f"{self.name}({max_len}, {d_model})"  # worded as the visible check words it
        expect_float32_table(got["pe"], what, str(case))
        compare_outputs(got, self.expected(case, device), what, str(case),
                        atol=angle_tolerance(max_len), against=FORMULA,
                        variants={m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()},
                        hint=lambda key, have: property_hint(have, d_model) or None)
