"""Visible checks of 10.3 Multi-head attention.

``split_heads`` and ``merge_heads`` are checked by what they must do to every feature block
(head i holds features i·d_h to (i+1)·d_h - 1 of every token); ``MultiHeadAttention``
against ``nn.MultiheadAttention(batch_first=True)`` holding the learner's weights. Wrong
variants: the same PyTorch module with other weights (no W_O: the identity; the scale of
sqrt(d_model): W_Q divided by sqrt(h)) or the mask passed the other way round.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import expect_linear_layers as check_layers
from course.compare import Mistake
from course.testing import (
    VisibleCheckFailure,
    check_close,
    check_outputs,
    check_pair,
    check_shape,
    check_tensor,
    expect_value_error,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)

HEAD_CASES = [  # name, B, n, d_model, h, dtype
    ("B=2, n=3, d_model=12, h=4", 2, 3, 12, 4, torch.float32),
    ("B=3, n=5, d_model=6, h=2, float64", 3, 5, 6, 2, torch.float64),
    ("one head", 2, 3, 8, 1, torch.float32),
    ("one feature per head", 2, 3, 4, 4, torch.float64),
]
TRANSPOSE_HINT = ("Reshape to (B, n, h, d_h) first, then swap the sequence and head axes "
                  "with .transpose(1, 2).")


def _blocks(x: torch.Tensor, h: int) -> list[torch.Tensor]:
    """Feature block i (columns i·d_h to (i+1)·d_h - 1) of every token: h tensors (B, n, d_h)."""
    d_h = x.shape[-1] // h
    return [x[..., i * d_h:(i + 1) * d_h] for i in range(h)]


def _check_heads(what: str, case: str, heads: torch.Tensor, tokens: torch.Tensor, wrong=None) -> None:
    """Head i of ``heads`` (B, h, n, d_h) must hold feature block i of ``tokens`` (B, n, d).

    ``wrong``, a known mistake whose ``run()`` gives wrong heads, is named when it fits.
    """
    for i, (head, block) in enumerate(zip(heads.unbind(1), _blocks(tokens, heads.shape[1]))):
        mistakes = {} if wrong is None else {
            "wrong": Mistake(wrong.description, wrong.hint, lambda i=i: wrong.run()[:, i])}
        check_close(head, block.detach(), f"{what}: head {i}", case, mistakes=mistakes,
                    against=f"feature block {i} of every token (features {i * head.shape[-1]} to "
                    f"{(i + 1) * head.shape[-1] - 1})")


def _gradient(function, x: torch.Tensor, seed: int):
    """function(x) and the gradient of x for a seeded random loss (checked for a cut graph)."""
    x = x.detach().requires_grad_()
    out = with_gradients(lambda: (function(x),), ("output",), {"x": x}, seed)
    cotangent = seeded(*out["output"].shape, seed=seed + 7919, dtype=torch.float64).to(x.dtype)
    return out["output"], out["grad x"], cotangent


@instant
def check_split_heads(split_heads) -> None:
    """(B, n, d) -> (B, h, n, d // h), with head i holding feature block i of every token."""
    for seed, (case, B, n, d, h, dtype) in enumerate(HEAD_CASES):
        x = seeded(B, n, d, seed=seed, dtype=dtype)
        what = f"split_heads(x, {h})"

        def learner(x, case=case, h=h):
            return check_tensor(run_learner("split_heads", case, split_heads, x, h), "split_heads's result")

        got, grad, cotangent = _gradient(learner, x, seed)
        check_shape(got, (B, h, n, d // h), what, case)
        wrong = Mistake("a reshape straight to (B, h, n, d_h) without the transpose", TRANSPOSE_HINT,
                        lambda x=x, h=h: x.reshape(x.shape[0], h, x.shape[1], -1))
        _check_heads(what, case, got, x, wrong)
        _check_heads(f"the gradient of x through {what}", case, cotangent, grad)
    passed("split_heads puts feature block i of every token into head i.")


@instant
def check_merge_heads(merge_heads) -> None:
    """(B, h, n, d_h) -> (B, n, h * d_h), the inverse of split_heads."""
    for seed, (case, B, n, d, h, dtype) in enumerate(HEAD_CASES):
        x = seeded(B, h, n, d // h, seed=seed, dtype=dtype)

        def learner(x, case=case):
            return check_tensor(run_learner("merge_heads", case, merge_heads, x), "merge_heads's result")

        got, grad, cotangent = _gradient(learner, x, seed)
        check_shape(got, (B, n, d), "merge_heads(x)", case)
        # what merge should undo: the wrong reshape, seen from the heads' side
        wrong = Mistake("a reshape straight to (B, n, h * d_h) without the transpose",
                        "Swap the head and sequence axes back with .transpose(1, 2), then "
                        ".reshape(B, n, h * d_h).", lambda x=x: x.reshape(x.shape[0], x.shape[2], -1))
        for i, (head, block) in enumerate(zip(x.unbind(1), _blocks(got, h))):
            def wrong_block(i=i, wrong=wrong, h=h):
                return _blocks(wrong.run(), h)[i]

            check_close(block, head, f"merge_heads(x): features {i * (d // h)} to {(i + 1) * (d // h) - 1}",
                        case, against=f"head {i} of every token",
                        mistakes={"reshape": Mistake(wrong.description, wrong.hint, wrong_block)})
        _check_heads("the gradient of x through merge_heads(x)", case, grad, cotangent)
    passed("merge_heads puts every token's heads back side by side: the inverse of split_heads.")


# ---------------------------------------------------------------- the module

PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")
MHA_HOW = ("Create four separate layers, in this order: w_q, w_k, w_v and w_o, each an "
           "nn.Linear(d_model, d_model, bias=bias).")
MHA_CASES = [  # name, B, n_q, n_k, d_model, h, mask, bias, dtype
    ("cross-attention, n_q=3, n_k=5, padding mask", 2, 3, 5, 12, 4, "padding", True, torch.float32),
    ("self-attention, causal mask", 2, 5, 5, 12, 3, "causal", True, torch.float64),
    ("cross-attention, bias=False, no mask", 2, 3, 5, 12, 3, None, False, torch.float64),
    ("one head, a different mask per sentence", 2, 3, 5, 6, 1, "random", True, torch.float64),
]


def mha_mask(kind, B, n_q, n_k, seed):
    """True = may attend, shaped as the notebooks pass it; every query keeps a key and loses one."""
    if kind is None:
        return None
    if kind == "causal":
        return torch.ones(n_q, n_k, dtype=torch.bool).tril()  # (n_q, n_k)
    if kind == "padding":
        keep = torch.arange(n_k) < torch.tensor([n_k - 2] + [n_k - 1] * (B - 1))[:, None]  # (B, n_k)
        return keep[:, None, None, :]  # (B, 1, 1, n_k)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, 1, n_q, n_k, generator=g) < 0.5
    mask[..., 0], mask[..., -1] = True, False
    return mask


def _torch_mha(module: nn.Module, h: int, *, w_o: bool = True, query_scale: float = 1.0):
    """nn.MultiheadAttention holding ``module``'s weights (W_O = identity if not w_o)."""
    d = module.w_q.weight.shape[0]
    bias = module.w_q.bias is not None
    layer = nn.MultiheadAttention(d, h, bias=bias, batch_first=True).to(module.w_q.weight.dtype)
    with torch.no_grad():  # PyTorch keeps W_Q, W_K, W_V stacked in one matrix
        layer.in_proj_weight.copy_(torch.cat([module.w_q.weight * query_scale, module.w_k.weight,
                                              module.w_v.weight]))
        layer.out_proj.weight.copy_(module.w_o.weight if w_o else torch.eye(d))
        if bias:
            layer.in_proj_bias.copy_(torch.cat([module.w_q.bias * query_scale, module.w_k.bias,
                                                module.w_v.bias]))
            layer.out_proj.bias.copy_(module.w_o.bias if w_o else torch.zeros(d))
    return layer


def _pytorch_call(layer: nn.Module, h: int, *, invert: bool = False, use_mask: bool = True,
                  values_from_keys: bool = False):
    """(query, key, value, mask) -> (output, weights) through nn.MultiheadAttention; the keywords
    switch on a known mistake (the mask inverted or left out, the keys used as values)."""
    def call(query, key, value, mask):
        blocked = None
        value = key if values_from_keys else value
        if mask is not None and use_mask:  # PyTorch: True = blocked, one (n_q, n_k) map per sentence and head
            B, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
            blocked = (mask if invert else ~mask).expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)
        return layer(query, key, value, attn_mask=blocked, need_weights=True, average_attn_weights=False)
    return call


def _mha_inputs(B, n_q, n_k, d, dtype, seed):
    """query, key, value: one sequence for self-attention (n_q == n_k), else three."""
    query = seeded(B, n_q, d, seed=seed, dtype=dtype)
    key = query.clone() if n_q == n_k else seeded(B, n_k, d, seed=seed + 1, dtype=dtype)
    value = query.clone() if n_q == n_k else seeded(B, n_k, d, seed=seed + 2, dtype=dtype)
    return {"query": query.requires_grad_(), "key": key.requires_grad_(), "value": value.requires_grad_()}


def _mha_outputs(call, spec, seed):
    case, B, n_q, n_k, d, h, kind, bias, dtype = spec
    x = _mha_inputs(B, n_q, n_k, d, dtype, seed)
    mask = mha_mask(kind, B, n_q, n_k, seed)
    return with_gradients(lambda: call(x["query"], x["key"], x["value"], mask), ("output", "weights"),
                          x, seed)


def _functional_heads(module, h, *, split_transpose=True, merge_transpose=True):
    """Attention heads built around F.scaled_dot_product_attention, one reshape switched wrong."""
    def call(query, key, value, mask):
        B, n_q, d = query.shape

        def heads(x, w):
            y = w(x)
            if split_transpose:
                return y.unflatten(-1, (h, d // h)).transpose(1, 2)
            return y.reshape(B, h, x.shape[1], d // h)  # the classic silent bug

        q, k, v = heads(query, module.w_q), heads(key, module.w_k), heads(value, module.w_v)
        identity = torch.eye(k.shape[-2], dtype=k.dtype).expand(*k.shape[:-1], k.shape[-2])
        weights = F.scaled_dot_product_attention(q, k, identity, attn_mask=mask)
        out = weights @ v  # (B, h, n_q, d_h)
        out = out.transpose(1, 2).flatten(2) if merge_transpose else out.reshape(B, n_q, d)
        return module.w_o(out), weights
    return call


def mha_mistakes(module, spec, seed) -> dict[str, Mistake]:
    h = spec[5]

    def through(**options):
        use = {k: options.pop(k) for k in ("invert", "use_mask", "values_from_keys") if k in options}
        return partial(_mha_outputs, _pytorch_call(_torch_mha(module, h, **options), h, **use), spec, seed)

    def heads(**switch):
        return partial(_mha_outputs, _functional_heads(module, h, **switch), spec, seed)

    return {
        "split": Mistake("splitting the heads without the transpose", TRANSPOSE_HINT,
                         heads(split_transpose=False)),
        "merge": Mistake("merging the heads without the transpose",
                         "Transpose (B, h, n, d_h) back to (B, n, h, d_h) before reshaping.",
                         heads(merge_transpose=False)),
        "no_w_o": Mistake("a missing output projection W_O",
                          "Mix the concatenated heads with self.w_o at the end.", through(w_o=False)),
        "d_model": Mistake("scaling by sqrt(d_model) instead of sqrt(d_k) of one head",
                           "Each head has d_k = d_model // num_heads features: scale by sqrt(d_k).",
                           through(query_scale=1 / math.sqrt(h))),
        "inverted": Mistake("the mask inverted",
                            "True means *may attend* (nn.MultiheadAttention uses the opposite!).",
                            through(invert=True)),
        "no_mask": Mistake("the mask not used", "Pass mask on to the attention of the heads.",
                           through(use_mask=False)),
        "values": Mistake("the values projected from key instead of value",
                          "v = self.w_v(value): in cross-attention keys and values are two inputs.",
                          through(values_from_keys=True)),
    }


@instant
def check_MultiHeadAttention(MultiHeadAttention) -> None:
    """Layers, then output, weights and gradients against nn.MultiheadAttention with the same weights."""
    expect_value_error("MultiHeadAttention", lambda: MultiHeadAttention(10, 3),
                       "when d_model=10 is not divisible by num_heads=3")
    for seed, spec in enumerate(MHA_CASES):
        case, B, n_q, n_k, d, h, kind, bias, dtype = spec
        module = run_learner("MultiHeadAttention", case, MultiHeadAttention, d, h, bias=bias)
        if not isinstance(module, nn.Module):
            raise VisibleCheckFailure("MultiHeadAttention(...) should create an nn.Module.")
        check_layers(module, "MultiHeadAttention", {w: (d, d) for w in PROJECTIONS}, MHA_HOW, bias=bias)
        with torch.no_grad():  # seeded weights: the same check for everyone
            for i, p in enumerate(module.parameters()):
                p.copy_(seeded(*p.shape, seed=1000 * seed + i, scale=0.5))
        module = module.to(dtype)

        def learner(query, key, value, mask, case=case, module=module):
            return check_pair(run_learner("MultiHeadAttention", case, module, query, key, value, mask=mask),
                              "MultiHeadAttention.forward")

        check_outputs(_mha_outputs(learner, spec, seed),
                      _mha_outputs(_pytorch_call(_torch_mha(module, h), h), spec, seed),
                      "MultiHeadAttention", case, against="nn.MultiheadAttention with the same weights",
                      mistakes=mha_mistakes(module, spec, seed))
    passed("MultiHeadAttention matches nn.MultiheadAttention: self- and cross-attention, masks, bias=False.")
