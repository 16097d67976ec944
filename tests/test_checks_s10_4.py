"""Do the hidden checks of 10.4 (positional encoding) accept right and reject wrong code?"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.checks import s10_4
from tests.check_helpers import assert_fails

ASSIGNMENT = "10.4-positional-encoding"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_solution_passes(solution):
    """Does the reference solution pass all three checks?"""
    s10_4.check_sinusoidal_positional_encoding(solution["sinusoidal_positional_encoding"])
    s10_4.check_PositionalEncoding(solution["PositionalEncoding"])
    s10_4.check_relative_shift_matrix(solution["relative_shift_matrix"])


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.4 exercise by name?"""
    from grader.checks import EXERCISES, SECTIONS

    assert SECTIONS["10.4"] is s10_4
    for name in ("sinusoidal_positional_encoding", "PositionalEncoding", "relative_shift_matrix"):
        assert EXERCISES[name].name == name


# ---------------------------------------------------------------- the encoding: right answers


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


@pytest.mark.parametrize("impl", [pe_complex, pe_loop, pe_float32])
def test_encoding_variants_pass(impl):
    """Are complex exponentials, plain loops and an all-float32 computation accepted?"""
    s10_4.check_sinusoidal_positional_encoding(impl)


# ---------------------------------------------------------------- the encoding: planted bugs


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


@pytest.mark.parametrize("impl, match", [
    (pe_swapped, "sine and cosine swapped"),
    (pe_exponent_i, r"exponent i/d_model instead of 2i/d_model"),
    (pe_exponent_doubled, r"4i/d_model"),
    (pe_from_one, "positions counted from 1"),
    (pe_inverted, "inverted"),
    (pe_halves, "two halves"),
    (pe_float64, "float32"),
    (pe_even_only, r"odd d_model=7.*raised RuntimeError|raised RuntimeError.*odd d_model=7"),
    (pe_batched, r"shape \(6, 8\)"),
    (pe_base_1000, "frequency ladder"),
    (pe_cos_own_column, r"cosine's exponent taken from its own column index"),
    (pe_cos_typo, r"sin² \+ cos² = 1"),
    (pe_halved, "Row 0 is position 0"),
])
def test_encoding_planted_bugs_fail(impl, match):
    """Is each wrong encoding rejected, with the diagnosis named?"""
    assert_fails(s10_4.check_sinusoidal_positional_encoding, impl, match)


def test_encoding_message_hides_the_answer():
    """Does a failure message give the error size but no expected value?"""
    message = assert_fails(s10_4.check_sinusoidal_positional_encoding, pe_from_one, "differs")
    assert "largest difference" in message
    assert "tensor(" not in message


# ---------------------------------------------------------------- the module


class PEFromLoop(nn.Module):
    """A right answer: the table from its own loop, size(1) and unsqueeze, F.dropout."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.register_buffer("pe", pe_float32(max_len, d_model))

    def forward(self, x):
        if x.size(1) > len(self.pe):
            raise ValueError("too long")
        return F.dropout(x + self.pe[: x.size(1)].unsqueeze(0), self.p, self.training)


class PEBase(nn.Module):
    """A right module that planted bugs below change one piece of."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe_float32(max_len, d_model))

    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe[:n])


class PEPlainAttribute(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.pe = pe_float32(max_len, d_model)


class PEParameter(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.pe = nn.Parameter(pe_float32(max_len, d_model), requires_grad=False)


class PENotPersistent(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.register_buffer("pe", pe_float32(max_len, d_model), persistent=False)


class PEThreeD(nn.Module):  # the Annotated Transformer's (1, max_len, d_model) buffer
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe_float32(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(1)])


class PENoLengthCheck(PEBase):
    def forward(self, x):
        return self.dropout(x + self.pe[: x.shape[1]])


class PEScaled(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x * math.sqrt(x.shape[-1]) + self.pe[:n])


class PEFromOne(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0] - 1:
            raise ValueError("too long")
        return self.dropout(x + self.pe[1 : n + 1])


class PEDropoutOnPE(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return x + self.dropout(self.pe[:n])


class PEAlwaysDropout(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        self.p = dropout

    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return F.dropout(x + self.pe[:n], self.p, training=True)


class PEFixedDevice(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        out = torch.zeros(x.shape, dtype=x.dtype)  # on the CPU, whatever x's device
        return self.dropout(out + x + self.pe[:n])


def test_module_variants_pass(solution):
    """Is a module with its own table, size(1), unsqueeze and F.dropout accepted?"""
    s10_4.check_PositionalEncoding(PEFromLoop)
    s10_4.check_PositionalEncoding(PEBase)


@pytest.mark.parametrize("impl, match", [
    (PEPlainAttribute, "no registered buffer called pe"),
    (PEParameter, "nn.Parameter"),
    (PENotPersistent, "persistent"),
    (PEThreeD, r"shape \(max_len, d_model\)"),
    (PENoLengthCheck, "should raise ValueError when x has n=7 positions but max_len=6"),
    (PEScaled, r"sqrt\(d_model\)"),
    (PEFromOne, "positions counted from 1"),
    (PEDropoutOnPE, "dropout to the sum"),
    (PEAlwaysDropout, r"eval\(\) mode"),
    (PEFixedDevice, "fixed device"),
])
def test_module_planted_bugs_fail(impl, match):
    """Is each wrong module rejected, with the diagnosis named?"""
    assert_fails(s10_4.check_PositionalEncoding, impl, match)


# ---------------------------------------------------------------- the shift matrix


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
    """A right answer in float64, filled entry by entry, negative k through the transpose."""
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


@pytest.mark.parametrize("impl", [shift_block_diag, shift_loop_float64])
def test_shift_variants_pass(impl):
    """Are torch.block_diag and an entry-by-entry float64 matrix accepted?"""
    s10_4.check_relative_shift_matrix(impl)


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


@pytest.mark.parametrize("impl, match", [
    (shift_textbook_rotation, "rotation transposed"),
    (shift_exponent_i, r"exponent i/d_model"),
    (shift_same_angle, "same angle"),
    (shift_inverted, "inverted"),
    (shift_no_error, "should raise ValueError for an odd d_model"),
    (shift_wrong_size, r"should have shape \(8, 8\)"),
])
def test_shift_planted_bugs_fail(impl, match):
    """Is each wrong shift matrix rejected, with the diagnosis named?"""
    assert_fails(s10_4.check_relative_shift_matrix, impl, match)


def test_shift_checked_far_beyond_training_positions():
    """Does the check test positions up to 10 000, where a float32 angle error would show?"""
    positions = s10_4.shift_positions(3, torch.device("cpu"))
    assert positions.max() >= 10_000 - 3 and positions.min() == 0
