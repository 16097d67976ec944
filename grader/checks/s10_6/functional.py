"""The contract's blocks from primitives, with switches for known mistakes, and their parameters in
PyTorch's layers: what the DecoderBlock and Transformer checks diagnose with and compare against."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import Outputs
from course.checking.blocks import ATTENTION


def block_shapes(d_model: int, d_ff: int, decoder: bool) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of a TransformerBlock (or DecoderBlock), in creation order."""
    shapes: dict[str, tuple[int, ...]] = {}
    for attention in ("self_attn", "cross_attn") if decoder else ("self_attn",):
        for w in ATTENTION:
            shapes[f"{attention}.{w}.weight"] = (d_model, d_model)
            shapes[f"{attention}.{w}.bias"] = (d_model,)
    shapes.update({"ffn.linear1.weight": (d_ff, d_model), "ffn.linear1.bias": (d_ff,),
                   "ffn.linear2.weight": (d_model, d_ff), "ffn.linear2.bias": (d_model,)})
    for norm in ("norm1", "norm2", "norm3") if decoder else ("norm1", "norm2"):
        shapes[f"{norm}.weight"] = (d_model,)
        shapes[f"{norm}.bias"] = (d_model,)
    return shapes


def _torch_slot(layer: nn.Module, name: str) -> tuple[torch.Tensor, int | None]:
    """Where our parameter ``name`` lives in an nn.Transformer*Layer: (tensor, chunk or None).

    ``self_attn.w_k.weight`` is chunk 1 of ``self_attn.in_proj_weight``; ``cross_attn`` is
    torch's ``multihead_attn``; ``ffn.linear1`` is ``linear1``; norms keep their names.
    """
    parts = name.split(".")
    if parts[0] in ("self_attn", "cross_attn"):
        attention = getattr(layer, "self_attn" if parts[0] == "self_attn" else "multihead_attn")
        w, kind = parts[1], parts[2]
        if w == "w_o":
            return getattr(attention.out_proj, kind), None
        return getattr(attention, f"in_proj_{kind}"), ATTENTION.index(w)
    if parts[0] == "ffn":
        return getattr(getattr(layer, parts[1]), parts[2]), None
    return getattr(getattr(layer, parts[0]), parts[1]), None


def copy_into_torch_layer(layer: nn.Module, values: Mapping[str, torch.Tensor], prefix: str = "") -> None:
    """Load our-named values (``prefix`` + name) into a torch Transformer layer."""
    with torch.no_grad():
        for full, value in values.items():
            if not full.startswith(prefix):
                continue
            tensor, chunk = _torch_slot(layer, full[len(prefix):])
            (tensor if chunk is None else tensor.chunk(3)[chunk]).copy_(value)


def torch_layer_grads(layer: nn.Module, names, prefix: str = "") -> Outputs:
    """The gradients of a torch layer's parameters, under our names (``grad <prefix><name>``)."""
    grads = {}
    for full in names:
        if not full.startswith(prefix):
            continue
        tensor, chunk = _torch_slot(layer, full[len(prefix):])
        grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
        grads[f"grad {full}"] = grad if chunk is None else grad.chunk(3)[chunk]
    return grads


# ---------------------------------------------------------------- a functional model with switches


def _attention(query, key_value, p, prefix, h, mask):
    """Multi-head attention from primitives with our parameter names; returns the output."""
    B, n_q, d = query.shape
    n_k = key_value.shape[1]

    def heads(x, w, n):  # (B, n, d) -> (B, h, n, d // h)
        projected = F.linear(x, p[f"{prefix}{w}.weight"], p[f"{prefix}{w}.bias"])
        return projected.view(B, n, h, d // h).transpose(1, 2)

    q, k, v = heads(query, "w_q", n_q), heads(key_value, "w_k", n_k), heads(key_value, "w_v", n_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)  # (B, h, n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, n_q, d)
    return F.linear(out, p[f"{prefix}w_o.weight"], p[f"{prefix}w_o.bias"])


def _ffn(x, p, prefix, activation):
    act = F.relu if activation == "relu" else F.gelu
    hidden = act(F.linear(x, p[f"{prefix}ffn.linear1.weight"], p[f"{prefix}ffn.linear1.bias"]))
    return F.linear(hidden, p[f"{prefix}ffn.linear2.weight"], p[f"{prefix}ffn.linear2.bias"])


def layer_norm(x, p, name):
    return F.layer_norm(x, x.shape[-1:], p[f"{name}.weight"], p[f"{name}.bias"])


def _residual(x, sublayer, p, norm, norm_first):
    """Post-norm LN(x + f(x)) or pre-norm x + f(LN(x))."""
    if norm_first:
        return x + sublayer(layer_norm(x, p, norm))
    return layer_norm(x + sublayer(x), p, norm)


def functional_encoder_block(x, p, prefix, h, mask, activation, norm_first):
    x = _residual(x, lambda y: _attention(y, y, p, f"{prefix}self_attn.", h, mask), p,
                  f"{prefix}norm1", norm_first)
    return _residual(x, lambda y: _ffn(y, p, prefix, activation), p, f"{prefix}norm2", norm_first)


DECODER_SWITCHES = {
    "use_tgt_mask": True,     # False: self-attention ignores tgt_mask
    "use_memory_mask": True,  # False: cross-attention ignores memory_mask
    "cross_from": "memory",  # "x": keys and values of the cross-attention from x (no mask fits)
    "norm3": "norm3",      # "none": no norm around the FFN; "norm2": norm2 reused
    "norm_memory": False,  # True: pre-norm also normalises memory with norm2
    "cross_residual": True,  # False: no residual around the cross-attention
    "force_norm_first": None,  # True/False: ignore the case's norm_first
}


def functional_decoder_block(x, memory, p, prefix, h, tgt_mask, memory_mask, activation,
                             norm_first, **switch):
    """A DecoderBlock from primitives; ``switch`` turns on one mistake (see DECODER_SWITCHES)."""
    s = {**DECODER_SWITCHES, **switch}
    norm_first = norm_first if s["force_norm_first"] is None else s["force_norm_first"]
    self_mask = tgt_mask if s["use_tgt_mask"] else None
    x = _residual(x, lambda y: _attention(y, y, p, f"{prefix}self_attn.", h, self_mask), p,
                  f"{prefix}norm1", norm_first)

    def cross(y):
        if s["cross_from"] == "x":
            return _attention(y, y, p, f"{prefix}cross_attn.", h, None)
        source = layer_norm(memory, p, f"{prefix}norm2") if s["norm_memory"] and norm_first else memory
        return _attention(y, source, p, f"{prefix}cross_attn.", h,
                          memory_mask if s["use_memory_mask"] else None)

    if s["cross_residual"]:
        x = _residual(x, cross, p, f"{prefix}norm2", norm_first)
    else:
        x = cross(layer_norm(x, p, f"{prefix}norm2")) if norm_first else \
            layer_norm(cross(x), p, f"{prefix}norm2")
    if s["norm3"] == "none":
        return x + _ffn(x, p, prefix, activation)
    return _residual(x, lambda y: _ffn(y, p, prefix, activation), p, f"{prefix}{s['norm3']}",
                     norm_first)

