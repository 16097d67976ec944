"""scaled_dot_product_attention: right answers written differently, and planted bugs."""

import math

import torch
import torch.nn.functional as F

from course.visible.s10_2.scaled_dot_product_attention import (
    FILL_FINITE,
    FLOAT32_INSIDE,
    MASK_AFTER_SOFTMAX,
    MASK_INVERTED,
    MASK_ZERO,
    NO_SCALE,
    SCALE_DK,
    SCALE_DV,
    SCALE_N,
    SOFTMAX_QUERIES,
)
from tests.answers import bug, right, with_pieces
from tests.answers.s10_2.softmax import softmax_logsumexp, softmax_naive

EXERCISE = "scaled_dot_product_attention"


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


def attention_lowest(Q, K, V, mask=None):
    """Blocked scores filled with the dtype's lowest number: finite, yet below every score."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention(scale=None, dim=-1, fill=float("-inf"), invert=False, after=False, softmax=torch.softmax,
              transpose=lambda K: K.transpose(-2, -1), mask_of=lambda mask, scores: mask):
    """A learner-like attention with one mistake switched on."""
    def attend(Q, K, V, mask=None):
        scores = Q @ transpose(K) / (math.sqrt(Q.shape[-1]) if scale is None else scale(Q, V))
        if mask is not None and not after:
            mask = mask_of(mask, scores)
            scores = scores.masked_fill(mask if invert else ~mask, fill)
        weights = softmax(scores, dim=dim)
        if mask is not None and after:
            weights = weights * mask
        return weights @ V, weights
    return attend


def attention_in_float32(Q, K, V, mask=None):
    """CS336-style: the scores and softmax in float32, cast back to the inputs' dtype."""
    scores = (Q.float() @ K.float().transpose(-2, -1)) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ V.float()).to(Q.dtype), weights.to(Q.dtype)


def attention_in_float64(Q, K, V, mask=None):
    """Everything cast to float64, and returned so: float32 inputs get float64 results."""
    return attention()(Q.double(), K.double(), V.double(), mask)


def attention_calls_reference(Q, K, V, mask=None):
    weights = attention()(Q, K, V, mask)[1]
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), weights


def attention_fixed_device(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        blocked = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)  # CPU only!
        scores = torch.where(mask, scores, blocked)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_swapped_outputs(Q, K, V, mask=None):
    output, weights = attention()(Q, K, V, mask)
    return weights, output


def answers(solution):
    return [
        right("solution", solution["scaled_dot_product_attention"]),
        right("attention_einsum", attention_einsum),
        right("attention_minus_1e9", attention_minus_1e9),
        right("attention_lowest", attention_lowest),
        right("the solution, the notebook's softmax without its max subtracted (d2l's): softmax's mistake",
              with_pieces(solution["scaled_dot_product_attention"], softmax=softmax_naive)),
        bug("no scaling", attention(scale=lambda Q, V: 1.0), hidden=r"without the 1/sqrt\(d_k\) scaling",
            mistake=NO_SCALE),
        bug("scale d_k", attention(scale=lambda Q, V: Q.shape[-1]), hidden="scaling by d_k instead of sqrt",
            mistake=SCALE_DK),
        bug("softmax over queries", attention(dim=-2), hidden="softmax over the query axis",
            mistake=SOFTMAX_QUERIES),
        bug("mask inverted", attention(invert=True), hidden="mask inverted", mistake=MASK_INVERTED),
        bug("mask after softmax", attention(after=True), hidden="mask applied after the softmax",
            mistake=MASK_AFTER_SOFTMAX),
        bug("masked scores 0", attention(fill=0.0), hidden="masked scores set to 0", mistake=MASK_ZERO),
        bug("masked scores -1e4", attention(fill=-1e4), hidden="finite number", mistake=FILL_FINITE),
        bug("naive softmax", attention(softmax=softmax_naive), hidden="inf or NaN"),
        bug("computed in float32, cast back (CS336's)", attention_in_float32, hidden="float32 rounding only",
            mistake=FLOAT32_INSIDE),
        bug("computed and returned in float64", attention_in_float64,
            hidden="returns float64 for inputs of float32"),
        bug("calls F.scaled_dot_product_attention", attention_calls_reference,
            hidden="No credit.*scaled_dot_product_attention"),
        bug("fixed device", attention_fixed_device, hidden="fixed device|device"),
        bug("outputs swapped", attention_swapped_outputs, hidden="should have shape"),
        bug("scale by d_v", attention(scale=lambda Q, V: math.sqrt(V.shape[-1])), hidden="differs",
            mistake=SCALE_DV),
        bug("K.transpose(1, 2): 3-D only", attention(transpose=lambda K: K.transpose(1, 2))),
        # K.T reverses every axis of a batch (spelled out: .T warns on batches)
        bug("K.T: 2-D only", attention(transpose=lambda K: K.permute(*reversed(range(K.dim()))))),
        bug("scale by sqrt(n_q)", attention(scale=lambda Q, V: math.sqrt(Q.shape[-2])), mistake=SCALE_N),
        bug("mask assumed square", attention(mask_of=lambda mask, scores: mask.expand(
            *scores.shape[:-2], scores.shape[-2], scores.shape[-2]))),
    ]
