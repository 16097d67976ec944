"""``sinusoidal_positional_encoding(max_len, d_model)``: the exercise, its known mistakes and its
visible check.

The reference is the formula entry by entry (Python's ``math``) at sampled rows: every row of a
small table, else the first, middle and last ones.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    angle_tolerance,
    compare_outputs,
    expect_shape,
    expect_tensor,
    passed,
    visible_check,
)

FORMULA = "the formula (sine in column 2i, cosine in column 2i+1, of pos / 10000^(2i/d_model))"
ODD = ("With an odd d_model there is one more even column (sine) than odd columns (cosine): the cosines use "
       "only the first d_model // 2 angles.")
FLOAT32 = "Compute in float64 if you like, then convert the finished table to float32."

SWAPPED = Mistake("swapped", "sine and cosine swapped (cosine in the even columns)",
                  "Even columns 2i hold the sine, odd columns 2i+1 the cosine.")
FROM_ONE = Mistake("from_one", "positions counted from 1 instead of 0",
                   "The first row is position 0: count the positions from 0, not from 1.")
EXPONENT_I = Mistake("exponent_i", "the exponent i/d_model instead of 2i/d_model (pair index without the 2)",
                     "Pair i uses 10000^(2i/d_model): 2i is the column of its sine (0, 2, 4, ...), "
                     "not the pair index i.")
EXPONENT_4I = Mistake("exponent_4i", "the exponent 4i/d_model: the column index 2i doubled again",
                      "The even column indices 0, 2, 4, ... already are 2i: doubling them gives 4i.")
COS_COLUMN = Mistake("cos_column", "the cosine's exponent taken from its own column index: (2i+1)/d_model "
                     "instead of 2i/d_model", "The sine in column 2i and the cosine in column 2i+1 share one "
                     "angle, pos / 10000^(2i/d_model).")
INVERTED = Mistake("inverted", "10000^(2i/d_model) inverted: the angle pos * 10000^(2i/d_model)",
                   "The angle is the position divided by 10000^(2i/d_model): the frequency of pair 0 is 1, "
                   "and the frequencies fall from there.")
HALVES = Mistake("halves", "the sines and cosines in two halves [sin ... sin, cos ... cos] instead of "
                 "interleaved pairs", "Interleave them: the sine of pair i in column 2i, its cosine next "
                 "to it in column 2i+1.")


def formula(pos: float, column: int, d_model: int, *, swap: bool = False, exponent: float = 2.0,
            inverted: bool = False, cos_column: bool = False) -> float:
    """One entry of the encoding; the keywords switch on known mistakes.

    ``exponent``: the factor before i in 10000^(exponent·i/d_model) (2 is right);
    ``inverted``: pos * 10000^(...) instead of pos / 10000^(...); ``swap``: cosine in the
    even columns; ``cos_column``: the cosine's exponent from its own column index 2i+1.
    """
    pair = column // 2
    power = (column if cos_column and column % 2 else exponent * pair) / d_model
    angle = pos * 10000.0 ** power if inverted else pos / 10000.0 ** power
    sine = (column % 2 == 0) != swap
    return math.sin(angle) if sine else math.cos(angle)


def halves_formula(pos: float, column: int, d_model: int) -> float:
    """The wrong layout [sin ... sin, cos ... cos]: column j < ceil(d/2) is the sine of pair j."""
    sines = (d_model + 1) // 2
    if column < sines:
        return formula(pos, 2 * column, d_model)
    return formula(pos, 2 * (column - sines) + 1, d_model)


def table(entry, positions, d_model: int, start: int = 0) -> torch.Tensor:
    """``entry(pos, column, d_model)`` for every column of ``positions``: (P, d_model), float64."""
    return torch.tensor([[entry(p + start, c, d_model) for c in range(d_model)] for p in positions],
                        dtype=torch.float64)


#: Each mistake as an entry of the table, and the first position it counts from.
ENTRIES = {SWAPPED: (partial(formula, swap=True), 0), FROM_ONE: (formula, 1),
           EXPONENT_I: (partial(formula, exponent=1.0), 0), EXPONENT_4I: (partial(formula, exponent=4.0), 0),
           COS_COLUMN: (partial(formula, cos_column=True), 0), INVERTED: (partial(formula, inverted=True), 0),
           HALVES: (halves_formula, 0)}


def sampled_positions(max_len: int, d_model: int) -> list[int]:
    """The positions (rows) checked: all of a small table, else the first, middle and last ones."""
    if max_len * d_model <= 600:
        return list(range(max_len))
    return sorted({0, 1, 2, 3, max_len // 3, max_len // 2, max_len - 2, max_len - 1})


def property_hint(pe: torch.Tensor, d_model: int) -> str:
    """Which property of a table (rows = positions 0, 1, ...) breaks first, when no mistake fits."""
    pe = pe.detach().double()
    if pe.shape[0] == 0 or not torch.isfinite(pe).all():
        return ""
    row0 = torch.tensor([0.0, 1.0] * d_model, dtype=torch.float64, device=pe.device)[:d_model]
    if not torch.allclose(pe[0], row0, atol=1e-5):
        return ("Row 0 is position 0: sin(0) = 0 in the even columns and cos(0) = 1 in the odd "
                "columns. Count positions from 0 and put the sine in column 2i, the cosine in 2i+1.")
    pairs = d_model // 2
    radius = pe[:, 0:2 * pairs:2] ** 2 + pe[:, 1:2 * pairs:2] ** 2  # (positions, pairs)
    bad = ((radius - 1).abs() > 1e-4).any(dim=0)
    if bad.any():
        i = int(torch.nonzero(bad)[0])
        return (f"Columns {2 * i} and {2 * i + 1} should be the sine and cosine of the same angle "
                f"(sin² + cos² = 1), but for pair i={i} they are not.")
    if pe.shape[0] > 1 and pairs:
        angle1 = torch.atan2(pe[1, 0:2 * pairs:2], pe[1, 1:2 * pairs:2])  # omega_i, if right
        omega = torch.tensor([10000.0 ** (-2 * i / d_model) for i in range(pairs)], dtype=torch.float64)
        bad = (angle1 - omega.to(pe.device)).abs() > 1e-4
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            return (f"The angle of pair i={i} should grow by omega_i = 1 / 10000^(2i / d_model) per "
                    "position (the frequency ladder); it does not.")
    return ("Check the frequency of each pair: the angle of pair i grows by 1 / 10000^(2i / d_model) "
            "per position.")


def expect_float32_table(pe: torch.Tensor, what: str, where: str) -> None:
    """The contract's dtype: float32."""
    if pe.dtype != torch.float32:
        raise CheckFailure(f"{what} should be float32, not {pe.dtype}, in {where}. {FLOAT32}")


def call_encoding(call, d_model: int):
    """The learner's call; an error for an odd d_model gets the hint about odd widths."""
    try:
        return call()
    except CheckFailure as failure:
        if d_model % 2 and "raised" in str(failure):
            raise CheckFailure(f"{failure}\n{ODD}") from failure
        raise


def _entries(entry, positions, d_model: int, start: int) -> dict:
    return {"pe": table(entry, positions, d_model, start)}


def cases(seed: int) -> list[Case]:
    """The tables checked (max_len, d_model): even and odd widths, one position, one pair, long."""
    sizes = [(6, 8, "even d_model"), (9, 7, "odd d_model"), (5, 3, "odd d_model"), (1, 4, "one position"),
             (50, 2, "one pair"), (100, 64, "a wide table"), (2000, 17, "2000 positions, odd d_model")]
    return [Case(f"max_len={n}, d_model={d}" + (" (odd)" if d % 2 else ""), seed + i,
                 {"max_len": n, "d_model": d}, torch.float32, kind=kind)
            for i, (n, d, kind) in enumerate(sizes)]


class SinusoidalPositionalEncoding(Exercise):
    """Shape, dtype and the formula entry by entry (Python's ``math``) at sampled rows."""

    name = "sinusoidal_positional_encoding"
    reference_name = FORMULA
    visible_cases = cases(0)

    def run(self, impl, case, device):
        n, d = case.params["max_len"], case.params["d_model"]
        out = call_encoding(lambda: self.call(case, impl, n, d), d)
        return {"pe": expect_tensor(out, f"{self.name}({n}, {d})", case).detach().to(device)}

    def evaluate(self, case, got, device):
        max_len, d_model, pe = case.params["max_len"], case.params["d_model"], got["pe"]
        what, where = f"{self.name}({max_len}, {d_model})", str(case)
        expect_shape(pe, (max_len, d_model), what, where)
        expect_float32_table(pe, what, where)
        positions = sampled_positions(max_len, d_model)
        where += f" (rows {', '.join(map(str, positions))})" if len(positions) < max_len else ""
        variants = {m: partial(_entries, entry, positions, d_model, start)
                    for m, (entry, start) in ENTRIES.items()}
        compare_outputs({"pe": pe.double()[positions]}, {"pe": table(formula, positions, d_model)}, what,
                        where,
                        atol=angle_tolerance(max_len), against=FORMULA, variants=variants,
                        hint=lambda key, have: property_hint(pe[:4], d_model) or None)


@visible_check
def check_sinusoidal_positional_encoding(sinusoidal_positional_encoding) -> None:
    """Shape, dtype and sampled entries against the formula; odd d_model; 2000 positions."""
    SinusoidalPositionalEncoding().run_cases(sinusoidal_positional_encoding)
    passed("sinusoidal_positional_encoding follows the formula, for odd d_model and 2000 positions too.")
