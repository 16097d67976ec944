"""sinusoidal_positional_encoding: right answers written differently, and planted bugs."""

import math

import torch

from course.visible.s10_4.sinusoidal_positional_encoding import (
    COS_COLUMN,
    EXPONENT_4I,
    EXPONENT_I,
    FROM_ONE,
    HALVES,
    INVERTED,
    SWAPPED,
)
from tests.answers import bug, right

EXERCISE = "sinusoidal_positional_encoding"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'the formula in float64: arithmetic, as right answers compute it'

def pe_complex(max_len, d_model):
    """Complex exponentials: e^{i pos w} holds cos (real part) and sin (imaginary part)."""
    pairs = (d_model + 1) // 2
    omega = 10000.0 ** (-torch.arange(pairs, dtype=torch.float64) * 2 / d_model)
    z = torch.polar(torch.ones(max_len, pairs, dtype=torch.float64),
                    torch.arange(max_len, dtype=torch.float64)[:, None] * omega)
    return torch.stack([z.imag, z.real], dim=-1).reshape(max_len, 2 * pairs)[:, :d_model].float()


def pe_loop(max_len, d_model):
    """Two Python loops and the math module, as written on paper."""
    rows = []
    for pos in range(max_len):
        row = []
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(max_len, d_model)


def pe_float32(max_len, d_model):
    """The Annotated Transformer's float32 computation, made to work for odd d_model."""
    position = torch.arange(0, max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)[:, : d_model // 2]
    return pe


def _angles(max_len, d_model, start=0, power=lambda two_i, d: two_i / d, invert=False):
    position = torch.arange(start, start + max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    scale = 10000.0 ** power(two_i, d_model)
    return position * scale if invert else position / scale


def _interleave(sin, cos, d_model):
    pe = torch.zeros(sin.shape[0], d_model, dtype=torch.float64)
    pe[:, 0::2] = sin
    pe[:, 1::2] = cos[:, : d_model // 2]
    return pe.float()


def pe_swapped(max_len, d_model):
    a = _angles(max_len, d_model)
    return _interleave(a.cos(), a.sin(), d_model)


def pe_exponent_i(max_len, d_model):
    a = _angles(max_len, d_model, power=lambda two_i, d: (two_i / 2) / d)
    return _interleave(a.sin(), a.cos(), d_model)


def pe_exponent_doubled(max_len, d_model):
    a = _angles(max_len, d_model, power=lambda two_i, d: 2 * two_i / d)
    return _interleave(a.sin(), a.cos(), d_model)


def pe_from_one(max_len, d_model):
    a = _angles(max_len, d_model, start=1)
    return _interleave(a.sin(), a.cos(), d_model)


def pe_inverted(max_len, d_model):
    a = _angles(max_len, d_model, invert=True)
    return _interleave(a.sin(), a.cos(), d_model)


def pe_halves(max_len, d_model):
    a = _angles(max_len, d_model)
    return torch.cat([a.sin(), a.cos()[:, : d_model // 2]], dim=-1).float()


def pe_float64(max_len, d_model):
    a = _angles(max_len, d_model)
    return _interleave(a.sin(), a.cos(), d_model).double()


def pe_even_only(max_len, d_model):  # the Annotated Transformer's code, which needs an even d_model
    position = torch.arange(0, max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def pe_cos_own_column(max_len, d_model):  # each column j uses pos / 10000^(j / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    for j in range(d_model):
        angle = torch.arange(max_len, dtype=torch.float64) / 10000 ** (j / d_model)
        pe[:, j] = angle.sin() if j % 2 == 0 else angle.cos()
    return pe.float()


def pe_cos_typo(max_len, d_model):  # a typo in one of the two lines: the cosine's base is 1000
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    return _interleave((position / 10000.0 ** (two_i / d_model)).sin(),
                       (position / 1000.0 ** (two_i / d_model)).cos(), d_model)


def pe_halved(max_len, d_model):
    return pe_float32(max_len, d_model) * 0.5


def pe_batched(max_len, d_model):
    return pe_float32(max_len, d_model).unsqueeze(0)  # (1, max_len, d_model)


def pe_base_1000(max_len, d_model):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    a = position / 1000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return _interleave(a.sin(), a.cos(), d_model)



def pe_odd_last_zero(max_len, d_model):
    """Odd d_model: the last sine column left at zero."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model - 1, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0:2 * angle.shape[1]:2] = angle.sin()
    pe[:, 1:2 * angle.shape[1]:2] = angle.cos()
    return pe.float()


def pe_from_the_visible_check(max_len, d_model):
    """The table the visible check compares with, taken from the course's shipped check code."""
    from course.visible.s10_4.sinusoidal_positional_encoding import formula, table

    return table(formula, range(max_len), d_model).float()


def answers(solution):
    return [
        right("solution", solution["sinusoidal_positional_encoding"]),
        right("pe_complex", pe_complex),
        right("pe_loop", pe_loop),
        right("pe_float32", pe_float32),
        bug("pe_swapped", pe_swapped, hidden="sine and cosine swapped", mistake=SWAPPED),
        bug("pe_exponent_i", pe_exponent_i, hidden=r"exponent i/d_model instead of 2i/d_model",
            mistake=EXPONENT_I),
        bug("pe_exponent_doubled", pe_exponent_doubled, hidden=r"4i/d_model", mistake=EXPONENT_4I),
        bug("pe_from_one", pe_from_one, hidden="positions counted from 1", mistake=FROM_ONE),
        bug("pe_inverted", pe_inverted, hidden="inverted", mistake=INVERTED),
        bug("pe_halves", pe_halves, hidden="two halves", mistake=HALVES),
        bug("pe_float64", pe_float64, hidden="float32"),
        bug("pe_even_only", pe_even_only,
            hidden=r"raised RuntimeError.*d_model=7 \(odd\)"),
        bug("pe_batched", pe_batched, hidden=r"shape \(6, 8\)"),
        bug("pe_base_1000", pe_base_1000, hidden="frequency ladder"),
        bug("pe_cos_own_column", pe_cos_own_column,
            hidden=r"cosine's exponent taken from its own column index",
            mistake=COS_COLUMN),
        bug("pe_cos_typo", pe_cos_typo, hidden=r"sin² \+ cos² = 1"),
        bug("pe_halved", pe_halved, hidden="Row 0 is position 0"),
        bug("pe_odd_last_zero", pe_odd_last_zero),
        bug("the visible check's table", pe_from_the_visible_check, hidden="No credit.*own checking code"),
    ]
