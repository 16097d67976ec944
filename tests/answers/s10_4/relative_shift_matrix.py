"""relative_shift_matrix: right answers written differently, and planted bugs."""

import math

import torch

from course.visible.s10_4.relative_shift_matrix import ABS_K, EXPONENT_I, INVERTED, SAME_ANGLE, TRANSPOSED
from tests.answers import bug, right

EXERCISE = "relative_shift_matrix"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'the formula in float64: arithmetic, as right answers compute it'

def _omega(d_model):
    return 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def shift_block_diag(k, d_model):
    """A right answer: torch.block_diag of the 2x2 rotations."""
    if d_model % 2:
        raise ValueError("odd")
    blocks = []
    for b in (k * _omega(d_model)).tolist():
        blocks.append(torch.tensor([[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]]))
    return torch.block_diag(*blocks)


def shift_loop_float64(k, d_model):
    """Filled entry by entry in float64, negative k through the transpose; returned in float64."""
    if d_model % 2 != 0:
        raise ValueError("odd")
    if k < 0:
        return shift_loop_float64(-k, d_model).T
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i in range(d_model // 2):
        b = k / 10000 ** (2 * i / d_model)
        M[2 * i, 2 * i] = M[2 * i + 1, 2 * i + 1] = math.cos(b)
        M[2 * i, 2 * i + 1] = math.sin(b)
        M[2 * i + 1, 2 * i] = -math.sin(b)
    return M



def _rotation(k, d_model, omega, sign=1.0):
    if d_model % 2:
        raise ValueError("odd")
    blocks = [torch.tensor([[math.cos(b), sign * math.sin(b)], [-sign * math.sin(b), math.cos(b)]])
              for b in (k * omega).tolist()]
    return torch.block_diag(*blocks)


def shift_textbook_rotation(k, d_model):  # [[cos, -sin], [sin, cos]]: the usual rotation matrix
    return _rotation(k, d_model, _omega(d_model), sign=-1.0)


def shift_exponent_i(k, d_model):
    return _rotation(k, d_model, 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model))


def shift_same_angle(k, d_model):
    return _rotation(k, d_model, torch.ones(d_model // 2, dtype=torch.float64))


def shift_inverted(k, d_model):
    return _rotation(k, d_model, 1 / _omega(d_model))


def shift_no_error(k, d_model):
    if d_model % 2:
        return torch.eye(d_model)
    return shift_block_diag(k, d_model)


def shift_wrong_size(k, d_model):
    return shift_block_diag(k, d_model)[: d_model // 2]



def shift_abs_k(k, d_model):
    """|k| instead of k: negative shifts go forward."""
    return shift_block_diag(abs(k), d_model)


def shift_halves(k, d_model):
    """Pairs (i, i + d/2) instead of (2i, 2i+1)."""
    if d_model % 2:
        raise ValueError("odd")
    half = d_model // 2
    M = torch.zeros(d_model, d_model)
    for i in range(half):
        b = k / 10000 ** (2 * i / d_model)
        M[i, i] = M[i + half, i + half] = math.cos(b)
        M[i, i + half], M[i + half, i] = math.sin(b), -math.sin(b)
    return M


def answers(solution):
    return [
        right("solution", solution["relative_shift_matrix"]),
        right("shift_block_diag", shift_block_diag),
        right("shift_loop", lambda k, d_model: shift_loop_float64(k, d_model).float()),
        bug("returns float64", shift_loop_float64, hidden="should be a float32 matrix"),
        bug("shift_textbook_rotation", shift_textbook_rotation, hidden="rotation transposed",
            mistake=TRANSPOSED),
        bug("shift_exponent_i", shift_exponent_i, hidden=r"exponent i/d_model", mistake=EXPONENT_I),
        bug("shift_same_angle", shift_same_angle, hidden="same angle", mistake=SAME_ANGLE),
        bug("shift_inverted", shift_inverted, hidden="inverted", mistake=INVERTED),
        bug("shift_no_error", shift_no_error, hidden="should raise ValueError for an odd d_model"),
        bug("shift_wrong_size", shift_wrong_size, hidden=r"should have shape \(8, 8\)"),
        bug("shift_abs_k", shift_abs_k, hidden=r"sign of k dropped", mistake=ABS_K),
        bug("shift_halves", shift_halves),
    ]
