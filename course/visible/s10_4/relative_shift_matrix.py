"""``relative_shift_matrix(k, d_model)``: the exercise, its known mistakes and its visible check.

The check moves the formula's encoding of positions up to 10 000 with the learner's M and
names a mistake from the angles of M's 2x2 blocks (no reference matrix is shown).
"""

from __future__ import annotations

import math

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
ABS_K = Mistake("abs_k", "the sign of k dropped: a shift back by |k| built as a shift forwards",
                "A negative k moves back: pe[pos + k] is an earlier position. Look for where the sign "
                "of k is lost (abs, a square, a range that only counts up).")
EXPONENT_I = Mistake("exponent_i", "the exponent i/d_model instead of 2i/d_model in omega_i",
                     "omega_i = 1 / 10000^(2i/d_model), as in the encoding.")
EXPONENT_4I = Mistake("exponent_4i", "the exponent 4i/d_model: the column index 2i doubled again",
                      "The even column indices 0, 2, 4, ... already are 2i: doubling them gives 4i.")
INVERTED = Mistake("inverted", "omega_i inverted (10000^(+2i/d_model))", "omega_i = 1 / 10000^(2i/d_model).")
SAME_ANGLE = Mistake("same_angle", "every block rotated by the same angle k",
                     "Pair i turns by k·omega_i: each block has its own frequency.")
HALVES = Mistake("halves", "blocks pairing column i with column i + d_model/2 (the halves layout)",
                 "The encoding interleaves its pairs: columns 2i and 2i+1.")
AGAINST = "pe[pos + k] (positions up to 10 000)"


def cases(seed: int) -> list[Case]:
    """The shifts checked (k, d_model): forwards, the identity, backwards, one pair, far."""
    shifts = [(1, 8, "a shift"), (3, 16, "a shift"), (0, 8, "k=0 (the identity)"), (-2, 8, "a shift back"),
              (1, 2, "one pair"), (37, 6, "a long shift"), (100, 64, "a long shift")]
    return [Case(f"k={k}, d_model={d}", seed + i, {"k": k, "d_model": d}, kind=kind)
            for i, (k, d, kind) in enumerate(shifts)]


def shift_positions(k: int) -> list[int]:
    """Positions pos (pos + k >= 0) near the start and near 10 000, far beyond any max_len."""
    return [p for p in [*range(0, 40), *range(9_960, 10_001)] if p + k >= 0]


def expect_square_matrix(M, k: int, d_model: int, where: str) -> torch.Tensor:
    """A float32 (d_model, d_model) tensor, like the encoding it moves."""
    what = f"relative_shift_matrix({k}, {d_model})"
    expect_tensor(M, what, where)
    if M.dtype != torch.float32:
        raise CheckFailure(f"{what} should be a float32 matrix, like the encoding, not {M.dtype}: compute "
                           "in float64 if you like, and convert the finished matrix to float32.")
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
            # for k < 0 the transposed rotation is the shift by |k|: the positive k came first
            return ABS_K if mistake is TRANSPOSED and k < 0 else mistake
    return None


class RelativeShiftMatrix(Exercise):
    """M @ pe[pos] == pe[pos + k] for positions up to 10 000; the mistake named from M's block angles."""

    name = "relative_shift_matrix"
    reference_name = AGAINST
    visible_cases = cases(0)

    def run(self, impl, case, device):
        k, d = case.params["k"], case.params["d_model"]
        M = expect_square_matrix(self.call(case, impl, k, d), k, d, str(case))
        return {"M": M.detach().to(device, torch.float64)}

    def evaluate(self, case, got, device):
        k, d_model, M = case.params["k"], case.params["d_model"], got["M"]
        positions = shift_positions(k)
        moved = table(formula, positions, d_model) @ M.cpu().T  # row j: (M @ pe[pos_j])^T
        mistake = block_mistake(M, k, d_model)
        compare_outputs({"output": moved}, {"output": table(formula, positions, d_model, start=k)},
                        f"M @ pe[pos] for k={k}", str(case), atol=2 * angle_tolerance(abs(k) + 1),
                        against=AGAINST,
                        variants={} if mistake is None else {mistake: lambda: {"output": moved}})

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(1, 7), "for an odd d_model=7")


@visible_check
def check_relative_shift_matrix(relative_shift_matrix) -> None:
    """M @ pe[pos] == pe[pos + k] for positions up to 10 000, several k (negative too); ValueError."""
    RelativeShiftMatrix().run_cases(relative_shift_matrix)
    passed("relative_shift_matrix moves the encoding by k positions, backwards too, up to position 10 000.")
