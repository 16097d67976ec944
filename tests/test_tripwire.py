"""Is calling the reference caught through every door, and is a correct answer written
from other primitives never caught? (grader/checks/tripwire.py, grader/autograde/cells.py)"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from grader.autograde.worker.cells import reference_calls
from grader.checks import s10_2, s10_3, s10_5
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.3-multi-head-attention"
NO_CREDIT = r"No credit for"

# ---------------------------------------------------------------- softmax


def _stable(x, dim):
    return x - x.amax(dim=dim, keepdim=True)


SOFTMAX_DOORS = {
    "torch.softmax": lambda x, dim=-1: torch.softmax(x, dim),
    "F.softmax": lambda x, dim=-1: F.softmax(x, dim=dim),
    "Tensor.softmax": lambda x, dim=-1: x.softmax(dim),
    "torch.special.softmax": lambda x, dim=-1: torch.special.softmax(x, dim),
    "nn.Softmax": lambda x, dim=-1: torch.nn.Softmax(dim)(x),
    "log_softmax().exp()": lambda x, dim=-1: torch.log_softmax(x, dim).exp(),
    "torch._softmax": lambda x, dim=-1: torch._softmax(x, dim, False),
    "torch._safe_softmax": lambda x, dim=-1: torch._safe_softmax(x, dim),
    "torch.ops.aten.softmax": lambda x, dim=-1: torch.ops.aten.softmax(x, dim),
    "torch.ops.aten._softmax.default": lambda x, dim=-1: torch.ops.aten._softmax.default(x, dim, False),
    "torch._C._VariableFunctions.softmax": lambda x, dim=-1: torch._C._VariableFunctions.softmax(x, dim),
    "getattr(torch, 'soft' + 'max')": lambda x, dim=-1: getattr(torch, "soft" + "max")(x, dim),
}


def softmax_without_function_modes(x, dim=-1):
    """Switches the Python-level tripwire off; the operator-level one still sees the kernel."""
    with torch._C.DisableTorchFunction():
        return torch.softmax(x, dim)


SOFTMAX_DOORS["torch._C.DisableTorchFunction()"] = softmax_without_function_modes


@pytest.mark.parametrize("door", SOFTMAX_DOORS)
def test_softmax_doors_earn_no_credit(door):
    """Does calling PyTorch's softmax by any door earn no credit for softmax?"""
    assert_fails(s10_2.check_softmax, SOFTMAX_DOORS[door], NO_CREDIT)


SOFTMAX_RIGHT = {
    "exp / sum": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(_stable(x, dim).exp()),
    "logsumexp": lambda x, dim=-1: (x - x.logsumexp(dim, keepdim=True)).exp(),
    "max().values": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(
        (x - x.max(dim, keepdim=True).values).exp()),
    "sigmoid-free exp2": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(
        torch.exp2(_stable(x, dim) / math.log(2))),
}


@pytest.mark.parametrize("variant", SOFTMAX_RIGHT)
def test_correct_softmaxes_keep_full_credit(variant):
    """Is a softmax written from other primitives (logsumexp, exp2 ...) still accepted?"""
    assert_passes(s10_2.check_softmax, SOFTMAX_RIGHT[variant])


# ---------------------------------------------------------------- attention


def _weights(Q, K, mask):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


def _with_weights(output_of):
    def attention(Q, K, V, mask=None):
        return output_of(Q, K, V, mask), _weights(Q, K, mask)
    return attention


ATTENTION_DOORS = {
    "F.scaled_dot_product_attention": lambda Q, K, V, m: F.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "torch._C._nn": lambda Q, K, V, m: torch._C._nn.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "torch.ops.aten": lambda Q, K, V, m: torch.ops.aten.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "the math kernel": lambda Q, K, V, m: torch.ops.aten._scaled_dot_product_attention_math(
        Q, K, V, attn_mask=m)[0],
}


def sdpa_without_function_modes(Q, K, V, m):
    with torch._C.DisableTorchFunction():
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=m)


ATTENTION_DOORS["torch._C.DisableTorchFunction()"] = sdpa_without_function_modes


@pytest.mark.parametrize("door", ATTENTION_DOORS)
def test_attention_doors_earn_no_credit(door):
    """Does computing the output with PyTorch's attention, by any door, earn no credit?"""
    assert_fails(s10_2.check_scaled_dot_product_attention, _with_weights(ATTENTION_DOORS[door]),
                 NO_CREDIT)


def attention_einsum(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    w = (scores - scores.logsumexp(-1, keepdim=True)).exp()
    return torch.einsum("...qk,...kd->...qd", w, V), w


def attention_baddbmm(Q, K, V, mask=None):
    lead = Q.shape[:-2]
    q, k, v = (t.reshape(-1, *t.shape[-2:]) for t in (Q, K, V))  # (batch, n, d)
    zeros = q.new_zeros(q.shape[0], q.shape[1], k.shape[1])
    scores = torch.baddbmm(zeros, q, k.transpose(1, 2), alpha=1 / math.sqrt(q.shape[-1]))
    scores = scores.reshape(*lead, *scores.shape[-2:])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = torch.bmm(w.reshape(-1, *w.shape[-2:]), v)
    return out.reshape(*lead, *out.shape[-2:]), w


@pytest.mark.parametrize("impl", [attention_einsum, attention_baddbmm], ids=lambda f: f.__name__)
def test_correct_attentions_keep_full_credit(impl):
    """Are attentions written with einsum + logsumexp, or baddbmm + torch.softmax, accepted?"""
    assert_passes(s10_2.check_scaled_dot_product_attention, impl)


def test_multi_head_attention_through_aten_earns_no_credit(solution):
    """Does a MultiHeadAttention whose core calls torch.ops.aten's attention earn no credit?"""
    base = solution["MultiHeadAttention"]

    class MultiHeadAten(base):
        def forward(self, query, key, value, mask=None):
            B, n_q, d = query.shape
            h = self.num_heads

            def split(t):  # (B, n, d) -> (B, h, n, d // h)
                return t.view(B, -1, h, d // h).transpose(1, 2)

            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            out = torch.ops.aten.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            weights = _weights(q, k, mask)
            return self.w_o(out.transpose(1, 2).reshape(B, n_q, d)), weights

    assert_fails(s10_3.check_MultiHeadAttention, MultiHeadAten, NO_CREDIT)


def test_block_through_torch_attention_earns_no_credit():
    """Does a TransformerBlock that runs nn.MultiheadAttention's fused core earn no credit?"""
    assert s10_5.transformer_block.forbidden.operators  # the operator-level wire is armed
    assert "aten._native_multi_head_attention" in dict(s10_5.transformer_block.forbidden.operators)


# ---------------------------------------------------------------- the source scan


@pytest.mark.parametrize("source, exercise, words", [
    ("return torch.ops.aten._softmax(x, dim, False)", "softmax", "torch.ops"),
    ("return torch._C._VariableFunctions.softmax(x, dim)", "softmax", "torch._C"),
    ("return x.softmax(dim)", "softmax", "calls softmax"),
    ("f = getattr(torch, 'soft' + 'max')", "softmax", "by name"),
    ("from torch.utils._python_dispatch import _disable_current_modes", "softmax", "dispatch"),
    ("out = F.scaled_dot_product_attention(q, k, v)", "MultiHeadAttention",
     "calls scaled_dot_product_attention"),
    ("self.core = nn.MultiheadAttention(d, h)", "TransformerBlock", "attention modules"),
    ("return F.linear(X, W_q.T), X @ W_k, X @ W_v", "qkv_projections", "calls linear"),
])
def test_source_scan_reports_doors(source, exercise, words):
    """Does the scan of a solution cell report calls of the reference and doors around the
    tripwires?"""
    assert any(words in found for found in reference_calls(source, exercise))


@pytest.mark.parametrize("source, exercise", [
    ("weights = torch.softmax(scores, dim=-1)", "scaled_dot_product_attention"),
    ("out, w = scaled_dot_product_attention(q, k, v, mask)", "MultiHeadAttention"),
    ("self.linear1 = nn.Linear(d_model, d_ff)", "FeedForward"),
    ("return x.softmax(-1)", "TransformerBlock"),
])
def test_source_scan_leaves_allowed_code_alone(source, exercise):
    """Are allowed calls (torch.softmax after its exercise, the learner's own attention) quiet?"""
    assert reference_calls(source, exercise) == []


def test_source_scan_finds_nothing_in_the_solutions():
    """Does no instructor solution cell trip the scan (no false flag on a right answer)?"""
    import nbformat

    from tests.settings import ROOT

    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") and not meta.get("grade"):
                assert reference_calls(cell.source, meta["grade_id"]) == [], (path.name, meta["grade_id"])
