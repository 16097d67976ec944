"""Do the hidden checks of 10.1 (Q, K, V projections) accept right and reject wrong code?"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.checks import s10_1
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.1-self-attention"


def test_solution_passes(solution):
    """Does the reference solution pass both checks?"""
    assert_passes(s10_1.check_qkv_projections, solution["qkv_projections"])
    assert_passes(s10_1.check_QKVProjection, solution["QKVProjection"])


# ---- correct variants, written differently


def qkv_einsum(X, W_q, W_k, W_v):
    return tuple(torch.einsum("...nd,dk->...nk", X, W) for W in (W_q, W_k, W_v))


def qkv_matmul_loop(X, W_q, W_k, W_v):
    return tuple(torch.matmul(X, W) for W in (W_q, W_k, W_v))


@pytest.mark.parametrize("impl", [qkv_einsum, qkv_matmul_loop])
def test_correct_variants_pass(impl):
    """Are differently written correct answers accepted?"""
    assert_passes(s10_1.check_qkv_projections, impl)


# ---- planted bugs


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


@pytest.mark.parametrize("impl, match", [
    (qkv_swapped, "W_q and W_k swapped"),
    (qkv_transposed, "raised RuntimeError"),
    (qkv_calls_linear, "No credit.*linear"),
    (qkv_list, "should return a tuple"),
    (qkv_detached, "grad"),
    (qkv_fixed_device, "fixed device"),
])
def test_planted_bugs_fail(impl, match):
    """Is each planted bug rejected, with a message that names it?"""
    assert_fails(s10_1.check_qkv_projections, impl, match)


class WithBias(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.w_q, self.w_k = nn.Linear(d_model, d_k), nn.Linear(d_model, d_k)
        self.w_v = nn.Linear(d_model, d_v)

    def forward(self, x):
        return self.w_q(x), self.w_k(x), self.w_v(x)


class ValueTooNarrow(WithBias):
    def __init__(self, d_model, d_k, d_v):
        nn.Module.__init__(self)
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_k, bias=False)


class KeyFromQuery(WithBias):
    def __init__(self, d_model, d_k, d_v):
        nn.Module.__init__(self)
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x):
        return self.w_q(x), self.w_q(x), self.w_v(x)


@pytest.mark.parametrize("impl, match", [
    (WithBias, "unexpected w_k.bias, w_q.bias, w_v.bias"),
    (ValueTooNarrow, "w_v.weight has shape"),
    (KeyFromQuery, "K differs"),
])
def test_planted_module_bugs_fail(impl, match):
    """Is each planted bug in QKVProjection rejected with a message that says what to fix?"""
    assert_fails(s10_1.check_QKVProjection, impl, match)
