"""qkv_projections: right answers written differently, and planted bugs."""

import torch
import torch.nn.functional as F

from course.visible.s10_1.qkv_projections import SWAPPED
from tests.answers import ON_A_FIXED_DEVICE, bug, right

EXERCISE = "qkv_projections"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


def qkv_einsum(X, W_q, W_k, W_v):
    return tuple(torch.einsum("...nd,dk->...nk", X, W) for W in (W_q, W_k, W_v))


def qkv_matmul_loop(X, W_q, W_k, W_v):
    return tuple(torch.matmul(X, W) for W in (W_q, W_k, W_v))


def qkv_swapped(X, W_q, W_k, W_v):
    return X @ W_k, X @ W_q, X @ W_v


def qkv_transposed(X, W_q, W_k, W_v):
    return X @ W_q.T, X @ W_k.T, X @ W_v.T


def qkv_calls_linear(X, W_q, W_k, W_v):
    return F.linear(X, W_q.T), F.linear(X, W_k.T), F.linear(X, W_v.T)


def qkv_list(X, W_q, W_k, W_v):
    return [X @ W_q, X @ W_k, X @ W_v]


def qkv_detached(X, W_q, W_k, W_v):
    return tuple((X @ W).detach() for W in (W_q, W_k, W_v))


def qkv_fixed_device(X, W_q, W_k, W_v):
    zero = torch.zeros(X.shape[-2], 1, dtype=X.dtype)  # on the CPU whatever X's device
    return X @ W_q + zero, X @ W_k + zero, X @ W_v + zero


def qkv_mm(X, W_q, W_k, W_v):
    """2-D only: torch.mm refuses a batch."""
    return torch.mm(X, W_q), torch.mm(X, W_k), torch.mm(X, W_v)


def qkv_einsum_3d(X, W_q, W_k, W_v):
    """3-D only: the batch axis is spelled out."""
    return tuple(torch.einsum("bnd,dk->bnk", X, W) for W in (W_q, W_k, W_v))


def qkv_float32(X, W_q, W_k, W_v):
    """float32 weights whatever the input's dtype."""
    return tuple(X @ W.float() for W in (W_q, W_k, W_v))


def answers(solution):
    return [
        right("solution", solution["qkv_projections"]),
        right("qkv_einsum", qkv_einsum),
        right("qkv_matmul_loop", qkv_matmul_loop),
        bug("qkv_swapped", qkv_swapped, hidden="W_q and W_k swapped", mistake=SWAPPED),
        bug("qkv_transposed", qkv_transposed, hidden="raised RuntimeError"),
        bug("qkv_calls_linear", qkv_calls_linear, hidden="No credit.*linear"),
        bug("qkv_list", qkv_list, hidden="should return a tuple"),
        bug("qkv_detached", qkv_detached, hidden="grad"),
        bug("qkv_fixed_device", qkv_fixed_device, hidden=ON_A_FIXED_DEVICE),
        bug("qkv_mm", qkv_mm),
        bug("qkv_einsum_3d", qkv_einsum_3d),
        bug("qkv_float32", qkv_float32),
    ]
