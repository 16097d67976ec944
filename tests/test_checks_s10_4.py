"""Do the hidden checks of 10.4 (positional encoding) accept right and reject wrong code?"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.samples import run_visible_test
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


# ---------------------------------------------------------------- rotary position embedding


def test_solution_rotary_passes(solution):
    """Does the notebook's apply_rotary pass its check?"""
    s10_4.check_apply_rotary(solution["apply_rotary"])


def _positions(x, positions):
    return torch.arange(x.shape[-2], device=x.device) if positions is None else positions


def rotary_complex(x, positions=None, base=10000.0):
    """A right answer: pairs as complex numbers, turned by e^(i p w) (view_as_complex, polar)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angle = _positions(x, positions).double()[:, None] * omega  # (n, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    turned = z * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(turned).reshape(x.shape).to(x.dtype)


def rotary_matrices(x, positions=None, base=10000.0):
    """A right answer: one block-diagonal rotation matrix per position, applied with einsum."""
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError("odd d")
    R = torch.zeros(n, d, d, dtype=torch.float64, device=x.device)
    for j, p in enumerate(_positions(x, positions).tolist()):
        for i in range(d // 2):
            a = p / base ** (2 * i / d)
            R[j, 2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor(
                [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64)
    return torch.einsum("nij,...nj->...ni", R, x.double()).to(x.dtype)


def rotary_float32_cached(x, positions=None, base=10000.0):
    """A right answer in the style of GPT-J: float32 frequencies, cos and sin repeated per column,
    the 'rotate every two' trick."""
    d = x.shape[-1]
    if d % 2 == 1:
        raise ValueError("odd d")
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, device=x.device).float() / d))
    freqs = torch.outer(_positions(x, positions).float(), inv_freq)  # (n, d/2)
    cos = freqs.cos().repeat_interleave(2, dim=-1).to(x.dtype)  # (n, d): c0 c0 c1 c1 ...
    sin = freqs.sin().repeat_interleave(2, dim=-1).to(x.dtype)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)  # (-b, a) per pair
    return x * cos + rotated * sin


def rotary_loop(x, positions=None, base=10000.0):
    """A right answer: a loop over the pairs with the math module's angles, written into a clone."""
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError("odd d")
    out = x.clone()
    p = _positions(x, positions).to(torch.float64)
    for i in range(d // 2):
        angle = p * math.pow(base, -2 * i / d)
        c, s = angle.cos().to(x.dtype)[:, None], angle.sin().to(x.dtype)[:, None]
        a, b = x[..., 2 * i: 2 * i + 1], x[..., 2 * i + 1: 2 * i + 2]
        out[..., 2 * i: 2 * i + 1] = a * c - b * s
        out[..., 2 * i + 1: 2 * i + 2] = a * s + b * c
    return out


@pytest.mark.parametrize("impl", [rotary_complex, rotary_matrices, rotary_float32_cached, rotary_loop])
def test_rotary_variants_pass(impl):
    """Are complex numbers, rotation matrices, a float32 GPT-J-style version and a loop accepted?"""
    s10_4.check_apply_rotary(impl)


def make_rotary(*, halves=False, clockwise=False, exponent=2.0, inverted=False, start=0,
                use_positions=True, use_base=True, swap=False, added=False, check_d=True,
                device_of_x=True, dtype="x", scale=None, square=False):
    """apply_rotary with one learner-like mistake switched on."""

    def rotary(x, positions=None, base=10000.0):
        n, d = x.shape[-2:]
        if check_d and d % 2:
            raise ValueError("odd d")
        where = x.device if device_of_x else None
        if positions is None or not use_positions:
            positions = torch.arange(n, device=where)
        b_ = base if use_base else 10000.0
        i = torch.arange(d // 2, dtype=torch.float64, device=where)
        power = exponent * i / d
        omega = b_ ** (power if inverted else -power)
        p = positions.double() + start
        angle = (p ** 2 if square else p)[:, None] * omega
        if added:
            pe = torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)
            return x + pe.to(x.dtype)
        cos, sin = angle.cos(), angle.sin()
        if swap:
            cos, sin = sin, cos
        if clockwise:
            sin = -sin
        first, second = (x[..., : d // 2], x[..., d // 2:]) if halves else (x[..., 0::2], x[..., 1::2])
        new_a, new_b = first * cos - second * sin, first * sin + second * cos
        if scale is not None:
            new_a, new_b = new_a * (1 + p[:, None] * scale), new_b * (1 + p[:, None] * scale)
        out = torch.cat([new_a, new_b], -1) if halves else torch.stack([new_a, new_b], -1).flatten(-2)
        return out if dtype == "promoted" else out.to(x.dtype)

    return rotary


ROTARY_BUGS = {
    "halves (rotate_half)": (make_rotary(halves=True), r"column i \+ d/2"),
    "clockwise": (make_rotary(clockwise=True), r"clockwise"),
    "exponent i/d": (make_rotary(exponent=1.0), r"exponent i/d instead of 2i/d"),
    "exponent 4i/d": (make_rotary(exponent=4.0), r"4i/d"),
    "inverted frequency": (make_rotary(inverted=True), r"frequency inverted"),
    "positions from 1": (make_rotary(start=1), r"positions counted from 1"),
    "positions ignored": (make_rotary(use_positions=False), r"positions argument ignored"),
    "base ignored": (make_rotary(use_base=False), r"base argument ignored"),
    "cos and sin swapped": (make_rotary(swap=True), r"cosine and sine exchanged"),
    "added, not rotated": (make_rotary(added=True), r"added to x instead of rotating"),
    "no error for odd d": (make_rotary(check_d=False), r"should raise ValueError for an odd d=5"),
    "tensors on a fixed device": (make_rotary(device_of_x=False), r"without a device"),
    "float64 out for float32 in": (make_rotary(dtype="promoted"), r"dtype of x \(torch\.float32\)"),
    "lengths grow with the position": (make_rotary(scale=0.1), r"length of each pair"),
    "angle grows with p squared": (make_rotary(square=True), r"depend only on m - n"),
}


@pytest.mark.parametrize("bug", ROTARY_BUGS)
def test_rotary_bugs_fail(bug):
    """Is each wrong rotary embedding rejected, with the diagnosis named?"""
    impl, match = ROTARY_BUGS[bug]
    assert_fails(s10_4.check_apply_rotary, impl, match)


def test_rotary_reference_has_the_offset_property():
    """Does the reference's score of q at m and k at n depend only on m - n (and the
    mistakes that break it really break it)?"""
    case = next(c for c in s10_4.ROTARY_CASES if "offset" in c.params)
    scores = s10_4.apply_rotary.reference(case, torch.device("cpu"))["scores"]
    assert torch.allclose(scores[1:, 1:], scores[:-1, :-1], atol=1e-12)
    assert not torch.allclose(scores[1:, :], scores[:-1, :], atol=1e-3)  # not constant either


@pytest.mark.parametrize("name", sorted(s10_4.ROTARY_MISTAKES))
def test_every_rotary_mistake_shows_in_some_case(name):
    """Is every named rotary mistake different from the right answer in at least one case?"""
    mistake, device = s10_4.ROTARY_MISTAKES[name], torch.device("cpu")
    differs = False
    for case in s10_4.ROTARY_CASES:
        want, got = s10_4.apply_rotary.reference(case, device), mistake.run(case, device)
        key = next(iter(want))
        differs |= not torch.allclose(got[key].double(), want[key].double(), atol=1e-6)
    assert differs, name


def test_unplaced_tensor_check_spares_right_answers():
    """Does the unplaced-tensor check accept arange(device=x.device), a CPU scalar tensor and
    .to(x.device), and reject a bare arange?"""
    from grader.checks.exercise import check_unplaced_tensors

    x = torch.randn(2, 3, 4)
    check_unplaced_tensors("f", lambda: x * torch.arange(4, device=x.device))
    check_unplaced_tensors("f", lambda: x * torch.tensor(2.0))
    check_unplaced_tensors("f", lambda: x * torch.arange(4).to(x.device))
    with pytest.raises(AssertionError, match="without a device"):
        check_unplaced_tensors("f", lambda: x * torch.arange(4))


@pytest.mark.parametrize("impl", [rotary_complex, rotary_matrices, rotary_float32_cached, rotary_loop])
def test_rotary_visible_test_accepts_right_answers(impl):
    """Does the notebook's visible test accept every right answer the hidden check accepts?"""
    run_visible_test(ASSIGNMENT, "apply_rotary", impl)


@pytest.mark.parametrize("bug", [bug for bug in ROTARY_BUGS if bug != "tensors on a fixed device"])
def test_rotary_visible_test_names_the_mistake(bug):
    """Does the visible test reject each planted bug (all but the fixed device, which only a GPU
    shows) with the hidden check's diagnosis?"""
    impl, match = ROTARY_BUGS[bug]
    assert_fails(lambda f: run_visible_test(ASSIGNMENT, "apply_rotary", f), impl, match)
