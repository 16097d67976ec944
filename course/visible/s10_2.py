"""Visible checks of 10.2 Scaled dot-product attention.

References: ``torch.softmax``; ``F.scaled_dot_product_attention`` for the output, and the
same function with the identity matrix as values for the weights (softmax(S) @ I = softmax(S)).
Wrong variants come from the same functions with other arguments (``scale=1.0``, the mask
inverted, the query and key roles exchanged).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

from course.compare import VARIANCE_RTOL, Mistake
from course.testing import (
    VisibleCheckFailure,
    check_outputs,
    check_pair,
    check_tensor,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)

# ---------------------------------------------------------------- softmax

SOFTMAX_CASES = [  # name, shape, dim, dtype, scale of the logits
    ("1-D, 7 logits", (7,), -1, torch.float64, 1.0),
    ("3-D (2, 3, 5), dim=-1", (2, 3, 5), -1, torch.float32, 1.0),
    ("3-D (2, 3, 5), dim=1", (2, 3, 5), 1, torch.float64, 1.0),
    ("4-D (2, 3, 4, 5), dim=0", (2, 3, 4, 5), 0, torch.float64, 1.0),
    ("float64, logits of magnitude 1e4", (2, 6), -1, torch.float64, 1e4),
    ("float32, logits of magnitude 1e4", (3, 5), -1, torch.float32, 1e4),
]
DIM_HINT = "Use the dim argument in max, sum and keepdim=True."


def _softmax_outputs(function, shape, dim, dtype, scale, seed):
    x = seeded(*shape, seed=seed, dtype=dtype, scale=scale).requires_grad_()
    return with_gradients(lambda: (function(x, dim),), ("output",), {"x": x}, seed)


@instant
def check_softmax(softmax) -> None:
    """Against torch.softmax along several dims, for 1-D to 4-D logits, some of magnitude 1e4."""
    for seed, (case, *spec) in enumerate(SOFTMAX_CASES):
        def learner(x, dim, case=case):
            return check_tensor(run_learner("softmax", case, softmax, x, dim=dim), "softmax's result")

        got = _softmax_outputs(learner, *spec, seed)
        if spec[3] > 1 and not torch.isfinite(got["output"]).all():
            raise VisibleCheckFailure(
                f"softmax gives inf or NaN in case '{case}'. exp overflows for large logits: subtract "
                "the maximum along dim first (softmax(x) = softmax(x - max(x))).")
        mistakes = {
            "last": Mistake("a softmax over the last axis whatever dim says", DIM_HINT, partial(
                _softmax_outputs, lambda x, dim: torch.softmax(x, -1), *spec, seed)),
            "first": Mistake("a softmax over the first axis (dim=0)", DIM_HINT, partial(
                _softmax_outputs, lambda x, dim: torch.softmax(x, 0), *spec, seed)),
            "global": Mistake("one softmax over all the entries of x", "Normalise along dim only: "
                              "max and sum with dim=dim, keepdim=True.", partial(
                                  _softmax_outputs, lambda x, dim: torch.softmax(x.flatten(), 0).view_as(x),
                                  *spec, seed)),
        }
        check_outputs(got, _softmax_outputs(torch.softmax, *spec, seed), "softmax", case,
                      against="torch.softmax", mistakes=mistakes)
    passed("softmax matches torch.softmax along any dim, for any shape, even for huge logits.")


# ---------------------------------------------------------------- attention

NAMES = ("output", "weights")
ATTENTION_CASES = [  # name, leading dims, n_q, n_k, d_k, d_v, mask, dtype, scale of Q and K
    ("2-D Q (3, 4), K (5, 4), V (5, 6), no mask", (), 3, 5, 4, 6, None, torch.float64, 1.0),
    ("a batch, n_q=3 queries and n_k=5 keys, no mask", (2,), 3, 5, 4, 6, None, torch.float32, 1.0),
    ("4-D (batch, heads), a different mask per head", (2, 3), 3, 5, 4, 6, "random", torch.float64, 1.0),
    ("causal mask (5, 5)", (2,), 5, 5, 4, 6, "causal", torch.float64, 1.0),
    ("padding mask (B, 1, n_k)", (2,), 3, 5, 4, 6, "padding", torch.float64, 1.0),
    ("float32, scores of magnitude 1e4, padding mask", (2,), 3, 5, 4, 6, "padding", torch.float32, 60.0),
]


def case_mask(kind, lead, n_q, n_k, seed):
    """A bool mask, True = may attend; every query keeps at least one key and loses one."""
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)  # (n_q, n_k)
    if kind == "padding":
        lengths = torch.tensor([n_k - 2] + [n_k - 1] * (lead[0] - 1))  # sentence 0: 2 pads
        keep = torch.arange(n_k) < lengths[:, None]  # (B, n_k)
        return keep.view(lead[0], *([1] * (len(lead) - 1)), 1, n_k)  # (B, [1,] 1, n_k)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*lead, n_q, n_k, generator=g) < 0.5
    mask[..., 0], mask[..., -1] = True, False  # key 0 always visible, the last one never
    return mask


def attention_inputs(lead, n_q, n_k, d_k, d_v, kind, dtype, scale, seed):
    """Q, K, V (fresh leaves) and the mask of a case."""
    x = {"Q": seeded(*lead, n_q, d_k, seed=seed, dtype=dtype, scale=scale),
         "K": seeded(*lead, n_k, d_k, seed=seed + 1, dtype=dtype, scale=scale),
         "V": seeded(*lead, n_k, d_v, seed=seed + 2, dtype=dtype)}
    return {k: v.requires_grad_() for k, v in x.items()}, case_mask(kind, lead, n_q, n_k, seed)


def pytorch_weights(Q, K, mask, **options):
    """softmax(QK^T * scale, masked) from F.scaled_dot_product_attention with identity values."""
    identity = torch.eye(K.shape[-2], dtype=K.dtype).expand(*K.shape[:-1], K.shape[-2])
    return F.scaled_dot_product_attention(Q, K, identity, attn_mask=mask, **options)


def pytorch_attention(Q, K, V, mask, **options):
    return (F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, **options),
            pytorch_weights(Q, K, mask, **options))


def _attention_outputs(attend, spec, seed):
    x, mask = attention_inputs(*spec, seed=seed)
    return with_gradients(lambda: attend(x["Q"], x["K"], x["V"], mask), NAMES, x, seed)


def _from_weights(weights_of):
    """A wrong attention whose weights are ``weights_of(Q, K, mask)``."""
    def attend(Q, K, V, mask):
        weights = weights_of(Q, K, mask)
        return weights @ V, weights
    return attend


def _over_queries(Q, K, mask):
    """Each key's weights over the queries sum to 1: the softmax over dim=-2."""
    flipped = None if mask is None else mask.transpose(-2, -1)
    return pytorch_weights(K, Q, flipped, scale=1 / math.sqrt(Q.shape[-1])).transpose(-2, -1)


def _inverted(Q, K, mask):
    """The mask used the other way round; rows left without a key are NaN, as 0/0 gives them."""
    if mask is None:
        return pytorch_weights(Q, K, None)
    weights = pytorch_weights(Q, K, ~mask)
    nothing = (~mask).expand_as(weights).sum(-1, keepdim=True) == 0
    return weights.masked_fill(nothing, float("nan"))


def _zero_filled(Q, K, mask):
    """Blocked scores set to 0 instead of -inf: an additive mask that cancels the score."""
    if mask is None:
        return pytorch_weights(Q, K, None)
    scale = 1 / math.sqrt(Q.shape[-1])
    cancel = (Q @ K.transpose(-2, -1) * scale).masked_fill(mask, 0.0)  # (..., n_q, n_k)
    return pytorch_weights(Q, K, -cancel)


def attention_mistakes(spec, seed) -> dict[str, Mistake]:
    def variant(weights_of):
        return partial(_attention_outputs, _from_weights(weights_of), spec, seed)

    d_k = spec[3]
    return {
        "no_scale": Mistake("attention without the 1/sqrt(d_k) scaling",
                            "Divide the scores QK^T by sqrt(d_k) before the softmax.",
                            variant(partial(pytorch_weights, scale=1.0))),
        "scale_dk": Mistake("scaling by d_k instead of sqrt(d_k)",
                            "The scale is 1/sqrt(d_k): math.sqrt(Q.shape[-1]).",
                            variant(partial(pytorch_weights, scale=1 / d_k))),
        "scale_dv": Mistake("scaling by sqrt(d_v), the width of the values",
                            "d_k is the width of the queries and keys: Q.shape[-1].",
                            variant(partial(pytorch_weights, scale=1 / math.sqrt(spec[4])))),
        "scale_n": Mistake("scaling by the square root of a sequence length, not of d_k",
                           "d_k is the last axis of Q: math.sqrt(Q.shape[-1]), not Q.shape[-2].",
                           variant(partial(pytorch_weights, scale=1 / math.sqrt(spec[1])))),
        "softmax_queries": Mistake("a softmax over the query axis (dim=-2)",
                                   "Each query's weights over the keys sum to 1: softmax over dim=-1.",
                                   variant(_over_queries)),
        "mask_inverted": Mistake("the mask inverted",
                                 "True means *may attend*: fill the scores where the mask is False "
                                 "(masked_fill(~mask, float('-inf'))).", variant(_inverted)),
        "mask_after_softmax": Mistake(
            "the mask applied after the softmax",
            "Mask the scores before the softmax, so the visible keys' weights still sum to 1.",
            variant(lambda Q, K, mask: pytorch_weights(Q, K, None) * (1 if mask is None else mask))),
        "mask_zero": Mistake("masked scores set to 0 instead of -inf",
                             "A score of 0 still gets weight exp(0); use float('-inf').",
                             variant(_zero_filled)),
    }


@instant
def check_scaled_dot_product_attention(scaled_dot_product_attention) -> None:
    """Against F.scaled_dot_product_attention: 2-D to 4-D, n_q != n_k, masks, large scores."""
    for seed, (case, *spec) in enumerate(ATTENTION_CASES):
        def learner(Q, K, V, mask, case=case):
            out = run_learner("scaled_dot_product_attention", case, scaled_dot_product_attention,
                              Q, K, V, mask=mask)
            return check_pair(out, "scaled_dot_product_attention")

        got = _attention_outputs(learner, spec, 100 * seed)
        if spec[-1] > 1 and not all(torch.isfinite(t).all() for t in got.values()):
            raise VisibleCheckFailure(
                f"scaled_dot_product_attention gives inf or NaN in case '{case}'. Use a numerically "
                "stable softmax (subtract the row maximum) and fill masked scores with -inf before it.")
        check_outputs(got, _attention_outputs(pytorch_attention, spec, 100 * seed),
                      "scaled_dot_product_attention", case, against="F.scaled_dot_product_attention",
                      mistakes=attention_mistakes(spec, 100 * seed))
    passed("scaled_dot_product_attention matches PyTorch on 2-D to 4-D inputs, with every kind of mask.")


# ---------------------------------------------------------------- the sqrt(d_k) experiment


@instant
def check_dot_product_variance(dot_product_variance) -> None:
    """About d_k without scaling, about 1 with it, within the grading tolerance."""
    for d_k in (8, 128):
        for scaled in (False, True):
            value = run_learner("dot_product_variance", f"d_k={d_k}, scaled={scaled}",
                                dot_product_variance, d_k, num_samples=5_000, scaled=scaled)
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise VisibleCheckFailure("dot_product_variance should return a number (a float), "
                                          f"not a {type(value).__name__}.") from None
            want = 1.0 if scaled else float(d_k)
            if not abs(value - want) <= VARIANCE_RTOL * want:
                hint = ("Divide each dot product by sqrt(d_k)." if scaled else
                        "Draw q and k with independent standard normal entries (torch.randn) "
                        "and take the variance of their dot products.")
                raise VisibleCheckFailure(
                    f"For d_k={d_k}{', scaled' if scaled else ''} the variance should be close to "
                    f"{want:g}; yours is {value:.3g}. {hint}")
    passed("The variance of q·k grows like d_k, and scaling brings it back to 1.")
