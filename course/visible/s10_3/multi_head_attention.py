"""Visible check of ``MultiHeadAttention(d_model, num_heads, bias=True)``, and its known mistakes.

Wrong variants: the same PyTorch module with other weights (no W_O: the identity; the scale of
sqrt(d_model): W_Q divided by sqrt(h)), the mask passed the other way round or not at all, or
heads built around ``F.scaled_dot_product_attention`` with one reshape wrong.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_linear_layers,
    expect_pair,
    expect_value_error,
    passed,
    seeded,
    visible_check,
    with_gradients,
)
from course.visible.s10_3.split_heads import TRANSPOSE_HINT

SPLIT = Mistake("split", "splitting the heads without the transpose", TRANSPOSE_HINT)
MERGE = Mistake("merge", "merging the heads without the transpose",
                "Transpose (B, h, n, d_h) back to (B, n, h, d_h) before reshaping.")
NO_W_O = Mistake("no_w_o", "a missing output projection W_O",
                 "Mix the concatenated heads with self.w_o at the end.")
D_MODEL = Mistake("d_model", "scaling by sqrt(d_model) instead of sqrt(d_k) of one head",
                  "Each head has d_k = d_model // num_heads features: scale by sqrt(d_k).")
INVERTED = Mistake("inverted", "the mask inverted",
                   "True means *may attend* (nn.MultiheadAttention uses the opposite!).")
NO_MASK = Mistake("no_mask", "the mask not used", "Pass mask on to the attention of the heads.")
VALUES = Mistake("values", "the values projected from key instead of value",
                 "v = self.w_v(value): in cross-attention keys and values are two inputs.")

NAMES = ("output", "weights")
PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")
HOW = ("Create four separate layers, in this order: w_q, w_k, w_v and w_o, each an "
       "nn.Linear(d_model, d_model, bias=bias).")
CASES = [  # name, B, n_q, n_k, d_model, h, mask, bias, dtype
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


def _inputs(B, n_q, n_k, d, dtype, seed):
    """query, key, value: one sequence for self-attention (n_q == n_k), else three."""
    query = seeded(B, n_q, d, seed=seed, dtype=dtype)
    key = query.clone() if n_q == n_k else seeded(B, n_k, d, seed=seed + 1, dtype=dtype)
    value = query.clone() if n_q == n_k else seeded(B, n_k, d, seed=seed + 2, dtype=dtype)
    return {"query": query.requires_grad_(), "key": key.requires_grad_(), "value": value.requires_grad_()}


def _outputs(call, spec, seed):
    case, B, n_q, n_k, d, h, kind, bias, dtype = spec
    x = _inputs(B, n_q, n_k, d, dtype, seed)
    mask = mha_mask(kind, B, n_q, n_k, seed)
    return with_gradients(lambda: call(x["query"], x["key"], x["value"], mask), NAMES, x, seed)


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


def _variants(module, spec, seed):
    """The known mistakes on one case, each with the outputs it gives there."""
    h = spec[5]

    def through(**options):
        use = {k: options.pop(k) for k in ("invert", "use_mask", "values_from_keys") if k in options}
        return partial(_outputs, _pytorch_call(_torch_mha(module, h, **options), h, **use), spec, seed)

    def heads(**switch):
        return partial(_outputs, _functional_heads(module, h, **switch), spec, seed)

    return {SPLIT: heads(split_transpose=False), MERGE: heads(merge_transpose=False),
            NO_W_O: through(w_o=False), D_MODEL: through(query_scale=1 / math.sqrt(h)),
            INVERTED: through(invert=True), NO_MASK: through(use_mask=False),
            VALUES: through(values_from_keys=True)}


@visible_check
def check_MultiHeadAttention(MultiHeadAttention) -> None:
    """Layers, then output, weights and gradients against nn.MultiheadAttention with the same weights."""
    expect_value_error("MultiHeadAttention", lambda: MultiHeadAttention(10, 3),
                       "when d_model=10 is not divisible by num_heads=3")
    for seed, spec in enumerate(CASES):
        case, B, n_q, n_k, d, h, kind, bias, dtype = spec
        where = f"case '{case}'"
        module = call_learner("MultiHeadAttention", where, MultiHeadAttention, d, h, bias=bias)
        if not isinstance(module, nn.Module):
            raise CheckFailure("MultiHeadAttention(...) should create an nn.Module.")
        expect_linear_layers(module, "MultiHeadAttention", {w: (d, d) for w in PROJECTIONS}, HOW, bias=bias)
        with torch.no_grad():  # seeded weights: the same check for everyone
            for i, p in enumerate(module.parameters()):
                p.copy_(seeded(*p.shape, seed=1000 * seed + i, scale=0.5))
        module = module.to(dtype)

        def learner(query, key, value, mask, where=where, module=module):
            out = call_learner("MultiHeadAttention", where, module, query, key, value, mask=mask)
            return expect_pair(out, "MultiHeadAttention.forward")

        pytorch = _pytorch_call(_torch_mha(module, h), h)
        compare_outputs(_outputs(learner, spec, seed), _outputs(pytorch, spec, seed),
                        "MultiHeadAttention", where, against="nn.MultiheadAttention with the same weights",
                        variants=_variants(module, spec, seed))
    probe = call_learner("MultiHeadAttention", "MultiHeadAttention(8, 2)", MultiHeadAttention, 8, 2)
    x, mask = torch.ones(2, 3, 8), torch.ones(3, 3, dtype=torch.bool)
    check_unplaced_tensors("MultiHeadAttention", lambda: probe(x, x, x, mask=mask))
    passed("MultiHeadAttention matches nn.MultiheadAttention: self- and cross-attention, masks, bias=False.")
