"""apply_rotary: right answers written differently, and planted bugs (one learner-like mistake each)."""

import math

import torch

from course.visible.s10_4.apply_rotary import (
    ADDED,
    BASE_IGNORED,
    CAT,
    CLOCKWISE,
    EXPONENT_4I,
    EXPONENT_I,
    FROM_ONE,
    HALVES,
    INVERTED,
    POSITIONS_IGNORED,
    SWAPPED,
)
from tests.answers import bug, right

EXERCISE = "apply_rotary"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'the formula in float64: arithmetic, as right answers compute it'

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


def rotary_table_moved(x, positions=None, base=10000.0):
    """A right answer in a published style: the angle table built on the CPU in float64, then
    moved to x's dtype and device."""
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError("odd d")
    p = torch.arange(n) if positions is None else positions.detach().cpu()
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = p.double()[:, None] * inv[None, :]
    cos, sin = (t.to(x.dtype).to(x.device) for t in (angle.cos(), angle.sin()))
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


def positions_on_the_cpu(x, positions=None, base=10000.0):
    """The positions moved to the CPU, and the table left there: right on the CPU only."""
    n, d = x.shape[-2:]
    if d % 2:
        raise ValueError("odd d")
    p = torch.arange(n, device=x.device) if positions is None else positions.cpu()
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    angle = p.double()[:, None] * inv[None, :]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], -1).flatten(-2)


def make_rotary(*, halves=False, clockwise=False, exponent=2.0, inverted=False, start=0,
                use_positions=True, use_base=True, swap=False, added=False, check_d=True,
                device_of_x=True, dtype="x", scale=None, square=False, cat=False):
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
        out = torch.cat([new_a, new_b], -1) if halves or cat else torch.stack([new_a, new_b], -1).flatten(-2)
        return out if dtype == "promoted" else out.to(x.dtype)

    return rotary



def rows_reversed(x, positions=None, base=10000.0):
    """Right for one sequence; with a batch the sequences come back in reverse order."""
    out = rotary_complex(x, positions, base)
    return out.flip(0) if x.dim() > 2 else out


def detached(x, positions=None, base=10000.0):
    return rotary_complex(x.detach(), positions, base)


def gradient_turned_forward(x, positions=None, base=10000.0):
    """Right values, and a hand-written backward that turns the gradient forward, not back."""
    class Rotate(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return rotary_complex(x, positions, base)

        @staticmethod
        def backward(ctx, grad):
            return rotary_complex(grad, positions, base)

    return Rotate.apply(x)


def answers(solution):
    return [
        right("solution", solution["apply_rotary"]),
        right("rotary_complex", rotary_complex),
        right("rotary_matrices", rotary_matrices),
        right("rotary_float32_cached", rotary_float32_cached),
        right("rotary_loop", rotary_loop),
        right("rotary_table_moved", rotary_table_moved),
        bug("halves (rotate_half)", make_rotary(halves=True), hidden=r"column i \+ d/2", mistake=HALVES),
        bug("put back as halves (torch.cat)", make_rotary(cat=True), hidden=r"two halves", mistake=CAT),
        bug("clockwise", make_rotary(clockwise=True), hidden=r"clockwise", mistake=CLOCKWISE),
        bug("exponent i/d", make_rotary(exponent=1.0), hidden=r"exponent i/d instead of 2i/d",
            mistake=EXPONENT_I),
        bug("exponent 4i/d", make_rotary(exponent=4.0), hidden=r"4i/d", mistake=EXPONENT_4I),
        bug("inverted frequency", make_rotary(inverted=True), hidden=r"frequency inverted", mistake=INVERTED),
        bug("positions from 1", make_rotary(start=1), hidden=r"positions counted from 1", mistake=FROM_ONE),
        bug("positions ignored", make_rotary(use_positions=False), hidden=r"positions argument ignored",
            mistake=POSITIONS_IGNORED),
        bug("base ignored", make_rotary(use_base=False), hidden=r"base argument ignored",
            mistake=BASE_IGNORED),
        bug("cos and sin swapped", make_rotary(swap=True), hidden=r"cosine and sine exchanged",
            mistake=SWAPPED),
        bug("added, not rotated", make_rotary(added=True), hidden=r"added to x instead of rotating",
            mistake=ADDED),
        bug("no error for odd d", make_rotary(check_d=False),
            hidden=r"should raise ValueError for an odd d=5"),
        bug("tensors on a fixed device", make_rotary(device_of_x=False), hidden=r"without a device",
            ),
        bug("positions moved to the CPU", positions_on_the_cpu, hidden=r"without a device"),
        bug("float64 out for float32 in", make_rotary(dtype="promoted"),
            hidden=r"dtype of x \(torch\.float32\)"),
        bug("lengths grow with the position", make_rotary(scale=0.1), hidden=r"length of each pair"),
        bug("angle grows with p squared", make_rotary(square=True), hidden=r"depend only on m - n"),
        bug("batch rows reversed", rows_reversed),
        bug("detached", detached),
        bug("gradient turned forward", gradient_turned_forward),
    ]
