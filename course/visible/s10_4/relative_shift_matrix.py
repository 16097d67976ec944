"""Visible check of ``relative_shift_matrix(k, d_model)``, and its known mistakes.

The check moves the formula's encoding of positions up to 10 000 with the learner's M and
names a mistake from the angles of M's 2x2 blocks (no reference matrix is shown).
"""

from __future__ import annotations

import math

import torch

from course.checking import (
    CheckFailure,
    Mistake,
    angle_tolerance,
    call_learner,
    compare_outputs,
    expect_shape,
    expect_tensor,
    expect_value_error,
    passed,
    visible_check,
)
from course.visible.s10_4.sinusoidal_positional_encoding import formula, table

ROWS = ("Row 2i (the sine) is [.. cos(k w_i), +sin(k w_i) ..], row 2i+1 (the cosine) is "
        "[.. -sin(k w_i), cos(k w_i) ..].")
TRANSPOSED = Mistake("transposed", "the rotation transposed: the signs of the sine terms swapped (a shift "
                     "by -k)", "sin(a+b) = cos b·sin a + sin b·cos a, cos(a+b) = -sin b·sin a + cos b·cos a. "
                     + ROWS)
EXPONENT_I = Mistake("exponent_i", "the exponent i/d_model instead of 2i/d_model in omega_i",
                     "omega_i = 1 / 10000^(2i/d_model), as in the encoding.")
EXPONENT_4I = Mistake("exponent_4i", "the exponent 4i/d_model: the column index 2i doubled again",
                      "torch.arange(0, d_model, 2) already is 2i.")
INVERTED = Mistake("inverted", "omega_i inverted (10000^(+2i/d_model))", "omega_i = 1 / 10000^(2i/d_model).")
SAME_ANGLE = Mistake("same_angle", "every block rotated by the same angle k",
                     "Pair i turns by k·omega_i: each block has its own frequency.")
HALVES = Mistake("halves", "blocks pairing column i with column i + d_model/2 (the halves layout)",
                 "The encoding interleaves its pairs: columns 2i and 2i+1.")
AGAINST = "pe[pos + k] (positions up to 10 000)"
CASES = [(1, 8), (3, 16), (0, 8), (-2, 8), (1, 2), (37, 6), (100, 64)]  # k, d_model


def shift_positions(k: int) -> list[int]:
    """Positions pos (pos + k >= 0) near the start and near 10 000, far beyond any max_len."""
    return [p for p in [*range(0, 40), *range(9_960, 10_001)] if p + k >= 0]


def expect_square_matrix(M, k: int, d_model: int, where: str) -> torch.Tensor:
    """A float32 (d_model, d_model) tensor, like the encoding it moves."""
    what = f"relative_shift_matrix({k}, {d_model})"
    expect_tensor(M, what, where)
    if M.dtype != torch.float32:
        raise CheckFailure(f"{what} should be a float32 matrix, like the encoding, not {M.dtype}: compute "
                           "in float64 if you like, and return M.float().")
    expect_shape(M, (d_model, d_model), what, where)
    return M


def block_mistake(M: torch.Tensor, k: int, d_model: int) -> Mistake | None:
    """The mistake M's 2x2 blocks show, from their angles."""
    M = M.detach().double()
    pairs = range(d_model // 2)
    off_pairs = sum(float(M[2 * i, 2 * i + 1].abs() + M[2 * i + 1, 2 * i].abs()) for i in pairs)
    halves = sum(float(M[i, i + d_model // 2].abs()) for i in pairs)
    if k and off_pairs < 1e-9 < halves:
        return HALVES
    angles = [math.atan2(float(M[2 * i, 2 * i + 1]), float(M[2 * i, 2 * i])) for i in pairs]

    def turns(step):  # would the block angles be k * step(i)?
        return all(abs(math.remainder(a - k * step(i), 2 * math.pi)) < 1e-4 for i, a in zip(pairs, angles))

    steps = {TRANSPOSED: lambda i: -(10000.0 ** (-2 * i / d_model)),
             EXPONENT_I: lambda i: 10000.0 ** (-i / d_model),
             EXPONENT_4I: lambda i: 10000.0 ** (-4 * i / d_model),
             INVERTED: lambda i: 10000.0 ** (2 * i / d_model), SAME_ANGLE: lambda i: 1.0}
    for mistake, step in steps.items():
        if k and turns(step) and not turns(lambda i: 10000.0 ** (-2 * i / d_model)):
            return mistake
    return None


@visible_check
def check_relative_shift_matrix(relative_shift_matrix) -> None:
    """M @ pe[pos] == pe[pos + k] for positions up to 10 000, several k (negative too); ValueError."""
    for k, d_model in CASES:
        where = f"case 'k={k}, d_model={d_model}'"
        M = call_learner("relative_shift_matrix", where, relative_shift_matrix, k, d_model)
        expect_square_matrix(M, k, d_model, where)
        positions = shift_positions(k)
        moved = table(formula, positions, d_model) @ M.detach().double().T  # row j: (M @ pe[pos_j])^T
        mistake = block_mistake(M, k, d_model)
        compare_outputs({"output": moved}, {"output": table(formula, positions, d_model, start=k)},
                       f"M @ pe[pos] for k={k}", where, atol=2 * angle_tolerance(abs(k) + 1), against=AGAINST,
                       variants={} if mistake is None else {mistake: lambda moved=moved: {"output": moved}})
    expect_value_error("relative_shift_matrix", lambda: relative_shift_matrix(1, 7), "for an odd d_model=7")
    passed("relative_shift_matrix moves the encoding by k positions, backwards too, up to position 10 000.")
