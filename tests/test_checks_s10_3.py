"""Do the hidden checks of 10.3 (heads, multi-head attention) accept right and reject wrong code?"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.checks import s10_3
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.3-multi-head-attention"


def test_solution_passes(solution):
    """Does the reference solution pass all three checks?"""
    assert_passes(s10_3.check_split_heads, solution["split_heads"])
    assert_passes(s10_3.check_merge_heads, solution["merge_heads"])
    assert_passes(s10_3.check_MultiHeadAttention, solution["MultiHeadAttention"])


# ---------------------------------------------------------------- split and merge


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def split_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def merge_permute(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


@pytest.mark.parametrize("check, impl", [
    (s10_3.check_split_heads, split_unflatten), (s10_3.check_split_heads, split_chunks),
    (s10_3.check_merge_heads, merge_permute), (s10_3.check_merge_heads, merge_cat),
])
def test_head_variants_pass(check, impl):
    """Are unflatten, chunk-and-stack, permute and cat accepted?"""
    assert_passes(check, impl)


def split_no_transpose(x, num_heads):
    B, n, d = x.shape
    return x.reshape(B, num_heads, n, d // num_heads)


def merge_no_transpose(x):
    B, h, n, d_h = x.shape
    return x.reshape(B, n, h * d_h)


def merge_view(x):
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).view(B, n, h * d_h)


def merge_heads_last(x):
    return x.transpose(1, 2).transpose(2, 3).flatten(2)  # (B, n, d_h * h): features interleaved


@pytest.mark.parametrize("check, impl, match", [
    (s10_3.check_split_heads, split_no_transpose, "without the transpose"),
    (s10_3.check_merge_heads, merge_no_transpose, "without the transpose"),
    (s10_3.check_merge_heads, merge_view, "not contiguous.*reshape"),
    (s10_3.check_merge_heads, merge_heads_last, "differs"),
])
def test_head_planted_bugs_fail(check, impl, match):
    """Is each planted split/merge bug rejected with a useful message?"""
    assert_fails(check, impl, match)


# ---------------------------------------------------------------- the module


class LearnerMHA(nn.Module):
    """A learner-like module; the class attributes switch one mistake on."""

    split_transpose = merge_transpose = use_w_o = True
    scale_by_d_model = invert_mask = average_heads = check_divisible = False
    force_bias = None

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if self.check_divisible and d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        bias = bias if self.force_bias is None else self.force_bias
        self.h, self.d_model = num_heads, d_model
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def split(self, x):
        B, n, _ = x.shape
        if self.split_transpose:
            return x.view(B, n, self.h, -1).transpose(1, 2)
        return x.reshape(B, self.h, n, -1)

    def attend(self, q, k, v, mask):
        d = self.d_model if self.scale_by_d_model else q.shape[-1]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(mask if self.invert_mask else ~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights

    def forward(self, query, key, value, mask=None):
        q, k, v = self.split(self.w_q(query)), self.split(self.w_k(key)), self.split(self.w_v(value))
        out, weights = self.attend(q, k, v, mask)
        B, h, n, d_h = out.shape
        out = out.transpose(1, 2).reshape(B, n, -1) if self.merge_transpose else out.reshape(B, n, -1)
        if self.use_w_o:
            out = self.w_o(out)
        return out, (weights.mean(1) if self.average_heads else weights)


def variant(**switches):
    return type("Variant", (LearnerMHA,), {"check_divisible": True, **switches})


class EinsumMHA(nn.Module):
    """A correct multi-head attention written with einsum and explicit head axes."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        q, k, v = (w(t).unflatten(-1, (self.h, -1)) for w, t in
                   ((self.w_q, query), (self.w_k, key), (self.w_v, value)))  # (B, n, h, d_h)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        weights = scores.softmax(-1)
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).flatten(2)
        return self.w_o(out), weights


class CallsReference(LearnerMHA):
    check_divisible = True

    def attend(self, q, k, v, mask):
        _, weights = super().attend(q, k, v, mask)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


def test_mha_variants_pass():
    """Is a correct einsum-based module with -1e9 masking accepted?"""
    assert_passes(s10_3.check_MultiHeadAttention, EinsumMHA)
    assert_passes(s10_3.check_MultiHeadAttention, variant())


@pytest.mark.parametrize("impl, match", [
    (variant(split_transpose=False), "splitting the heads without the transpose"),
    (variant(merge_transpose=False), "merging the heads without the transpose"),
    (variant(use_w_o=False), "missing output projection"),
    (variant(scale_by_d_model=True), "sqrt\\(d_model\\) instead of sqrt\\(d_k\\)"),
    (variant(invert_mask=True), "mask inverted"),
    (variant(average_heads=True), "weights should have shape"),
    (variant(force_bias=True), "unexpected w_k.bias"),
    (type("NoCheck", (LearnerMHA,), {}), "should raise ValueError"),
    (CallsReference, "No credit.*scaled_dot_product_attention"),
])
def test_mha_planted_bugs_fail(impl, match):
    """Is each planted multi-head attention bug rejected, named where it is a known mistake?"""
    assert_fails(s10_3.check_MultiHeadAttention, impl, match)
