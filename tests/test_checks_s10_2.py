"""Do the hidden checks of 10.2 (softmax, attention, the sqrt(d_k) experiment) judge rightly?"""

import math

import pytest
import torch
import torch.nn.functional as F

from grader.checks import s10_2
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.2-scaled-dot-product-attention"


def test_solution_passes(solution):
    """Does the reference solution pass all three checks?"""
    assert_passes(s10_2.check_softmax, solution["softmax"])
    assert_passes(s10_2.check_scaled_dot_product_attention, solution["scaled_dot_product_attention"])
    assert_passes(s10_2.check_dot_product_variance, solution["dot_product_variance"])


# ---------------------------------------------------------------- softmax


def softmax_logsumexp(x, dim=-1):
    return (x - x.logsumexp(dim, keepdim=True)).exp()


def softmax_max_values(x, dim=-1):
    e = torch.exp(x - torch.max(x, dim=dim, keepdim=True).values)
    return e / torch.sum(e, dim=dim, keepdim=True)


@pytest.mark.parametrize("impl", [softmax_logsumexp, softmax_max_values])
def test_softmax_variants_pass(impl):
    """Are differently written stable softmaxes accepted?"""
    assert_passes(s10_2.check_softmax, impl)


def softmax_naive(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim, keepdim=True)


def softmax_last_axis(x, dim=-1):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_global(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum()


def softmax_torch(x, dim=-1):
    return torch.softmax(x, dim)


def softmax_method(x, dim=-1):
    return x.softmax(dim)


def softmax_no_keepdim(x, dim=-1):
    e = (x - x.amax(dim)).exp()
    return e / e.sum(dim)


@pytest.mark.parametrize("impl, match", [
    (softmax_naive, "inf or NaN.*subtract the maximum"),
    (softmax_last_axis, "last axis whatever dim"),
    (softmax_global, "differs"),
    (softmax_torch, "No credit.*torch.softmax"),
    (softmax_method, "No credit.*Tensor.softmax"),
    (softmax_no_keepdim, "raised RuntimeError|differs"),
])
def test_softmax_planted_bugs_fail(impl, match):
    """Is each planted softmax bug rejected with a useful message?"""
    assert_fails(s10_2.check_softmax, impl, match)


# ---------------------------------------------------------------- attention


def attention_einsum(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / Q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kv->...qv", weights, V), weights


def attention_minus_1e9(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
    weights = softmax_logsumexp(scores)
    return weights @ V, weights


@pytest.mark.parametrize("impl", [attention_einsum, attention_minus_1e9])
def test_attention_variants_pass(impl):
    """Are einsum, masking with -1e9 and a logsumexp softmax accepted?"""
    assert_passes(s10_2.check_scaled_dot_product_attention, impl)


def _attention(scale=None, dim=-1, fill=float("-inf"), invert=False, after=False, softmax=torch.softmax):
    """A learner-like attention with one mistake switched on."""
    def attend(Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / (math.sqrt(Q.shape[-1]) if scale is None else scale(Q))
        if mask is not None and not after:
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = softmax(scores, dim=dim)
        if mask is not None and after:
            weights = weights * mask
        return weights @ V, weights
    return attend


def attention_calls_reference(Q, K, V, mask=None):
    weights = _attention()(Q, K, V, mask)[1]
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), weights


def attention_fixed_device(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        blocked = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)  # CPU only!
        scores = torch.where(mask, scores, blocked)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_swapped_outputs(Q, K, V, mask=None):
    output, weights = _attention()(Q, K, V, mask)
    return weights, output


def attention_scale_dv(Q, K, V, mask=None):
    return _attention(scale=lambda Q: math.sqrt(V.shape[-1]))(Q, K, V, mask)


@pytest.mark.parametrize("impl, match", [
    (_attention(scale=lambda Q: 1.0), "without the 1/sqrt\\(d_k\\) scaling"),
    (_attention(scale=lambda Q: Q.shape[-1]), "scaling by d_k instead of sqrt"),
    (_attention(dim=-2), "softmax over the query axis"),
    (_attention(invert=True), "mask inverted"),
    (_attention(after=True), "mask applied after the softmax"),
    (_attention(fill=0.0), "masked scores set to 0"),
    (_attention(softmax=lambda s, dim: softmax_naive(s, dim)), "inf or NaN"),
    (attention_calls_reference, "No credit.*scaled_dot_product_attention"),
    (attention_fixed_device, "fixed device|device"),
    (attention_swapped_outputs, "should have shape"),
    (attention_scale_dv, "differs"),
])
def test_attention_planted_bugs_fail(impl, match):
    """Is each planted attention bug rejected, named where it is a known mistake?"""
    assert_fails(s10_2.check_scaled_dot_product_attention, impl, match)


def test_masked_keys_get_no_gradient(solution):
    """Does the reference give zero gradient to keys no query may see (what the check compares)?"""
    case = next(c for c in s10_2.ATTENTION_CASES if c.params["mask"] == "padding")
    outputs = s10_2.ScaledDotProductAttention().run(solution["scaled_dot_product_attention"], case,
                                                    torch.device("cpu"))
    _, mask = s10_2.attention_inputs(case, torch.device("cpu"))
    never_seen = ~mask.any(dim=-2)  # (B, 1, n_k): keys blocked for every query
    assert never_seen.any()
    assert (outputs["grad K"][never_seen.squeeze(1)] == 0).all()


# ---------------------------------------------------------------- the variance experiment


def variance_no_scaling(d_k, num_samples=10_000, scaled=False):
    q, k = torch.randn(num_samples, d_k), torch.randn(num_samples, d_k)
    return (q * k).sum(-1).var().item()


def variance_scaled_by_dk(d_k, num_samples=10_000, scaled=False):
    dots = (torch.randn(num_samples, d_k) * torch.randn(num_samples, d_k)).sum(-1)
    return (dots / d_k if scaled else dots).var().item()


def variance_uniform(d_k, num_samples=10_000, scaled=False):
    dots = (torch.rand(num_samples, d_k) * torch.rand(num_samples, d_k)).sum(-1)
    return (dots / math.sqrt(d_k) if scaled else dots).var().item()


def variance_as_tensor(d_k, num_samples=10_000, scaled=False):
    dots = (torch.randn(num_samples, d_k) * torch.randn(num_samples, d_k)).sum(-1)
    return (dots / math.sqrt(d_k) if scaled else dots).var()  # a 0-d tensor is a number too


def test_variance_tensor_result_passes():
    """Is a 0-d tensor accepted as the number it is?"""
    assert_passes(s10_2.check_dot_product_variance, variance_as_tensor)


@pytest.mark.parametrize("impl, match", [
    (variance_no_scaling, "Divide each dot product by sqrt"),
    (variance_scaled_by_dk, "Divide each dot product by sqrt"),
    (variance_uniform, "standard normal"),
])
def test_variance_planted_bugs_fail(impl, match):
    """Does the experiment's check reject wrong simulations?"""
    assert_fails(s10_2.check_dot_product_variance, impl, match)
