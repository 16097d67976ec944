"""The contract's Transformer blocks next to PyTorch's layers: parameter names, structure, weights
copied into ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``, masks in their
polarity, and dropout that must be off in ``eval()`` mode."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from course.checking.failure import CheckFailure
from course.checking.modules import expect_distinct
from course.checking.outputs import seeded

#: The projections of the contract's MultiHeadAttention, in PyTorch's in_proj order (then w_o).
ATTENTION = ("w_q", "w_k", "w_v", "w_o")
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


def seed_parameters(module: nn.Module, seed: int) -> None:
    """Seeded random values for every parameter (LayerNorm weights and biases included)."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(seeded(*p.shape, seed=seed + i, scale=0.5))


def torch_mask(mask: torch.Tensor | None, B: int, h: int, n_q: int, n_k: int) -> torch.Tensor | None:
    """Our mask (True = may attend, broadcastable) as PyTorch's attn_mask (B*h, n_q, n_k), True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)


def copy_into_torch(layer: nn.Module, module: nn.Module, *, swap: dict[str, str] | None = None) -> nn.Module:
    """Load an encoder or decoder block's weights into an nn.Transformer*Layer; returns the layer.

    ``w_q``, ``w_k``, ``w_v`` go into ``in_proj_*`` (stacked), ``cross_attn`` is PyTorch's
    ``multihead_attn``, ``ffn.linearX`` its ``linearX``; ``swap`` maps norms to other norms
    (``{"norm1": "norm2"}`` loads our norm2 into PyTorch's norm1).
    """
    mine = dict(module.named_parameters())
    with torch.no_grad():
        for attention, theirs in (("self_attn", "self_attn"), ("cross_attn", "multihead_attn")):
            if not hasattr(layer, theirs) or f"{attention}.w_q.weight" not in mine:
                continue
            target = getattr(layer, theirs)
            target.in_proj_weight.copy_(torch.cat([mine[f"{attention}.{w}.weight"] for w in ATTENTION[:3]]))
            target.in_proj_bias.copy_(torch.cat([mine[f"{attention}.{w}.bias"] for w in ATTENTION[:3]]))
            target.out_proj.weight.copy_(mine[f"{attention}.w_o.weight"])
            target.out_proj.bias.copy_(mine[f"{attention}.w_o.bias"])
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(mine[f"ffn.{name}.weight"])
            getattr(layer, name).bias.copy_(mine[f"ffn.{name}.bias"])
        for norm in ("norm1", "norm2", "norm3"):
            source = (swap or {}).get(norm, norm)
            if hasattr(layer, norm) and f"{source}.weight" in mine:
                getattr(layer, norm).weight.copy_(mine[f"{source}.weight"])
                getattr(layer, norm).bias.copy_(mine[f"{source}.bias"])
    return layer


def block_parameter_names(attentions: Iterable[str], norms: Iterable[str]) -> set[str]:
    """The contract's parameter names of an encoder or decoder block."""
    names = {f"{a}.{w}.{k}" for a in attentions for w in ATTENTION for k in ("weight", "bias")}
    names |= {f"ffn.linear{i}.{k}" for i in (1, 2) for k in ("weight", "bias")}
    return names | {f"{norm}.{k}" for norm in norms for k in ("weight", "bias")}


def expect_block_structure(what: str, module: nn.Module, attentions, norms, how: str) -> None:
    """The contract's submodules, all distinct, LayerNorms with PyTorch's eps, no other parameters."""
    if not isinstance(module, nn.Module):
        raise CheckFailure(f"{what}(...) should create an nn.Module, not a {type(module).__name__}.")
    for name in (*attentions, "ffn", *norms):
        if not isinstance(getattr(module, name, None), nn.Module):
            raise CheckFailure(f"{what} needs a submodule self.{name}. {how}")
    expect_distinct(module, what, (*attentions, "ffn", *norms), how)
    for name in norms:
        norm = getattr(module, name)
        if isinstance(norm, nn.LayerNorm) and norm.eps != 1e-5:
            raise CheckFailure(f"{what}: {name} has eps={norm.eps}; PyTorch's layers use "
                               "nn.LayerNorm's default eps=1e-5.")
    expect_parameters(what, module, block_parameter_names(attentions, norms), how)


def expect_parameters(what: str, module: nn.Module, want: set[str], how: str) -> None:
    """Fail unless the module's parameters are exactly ``want``, naming what is missing or extra."""
    have = set(dict(module.named_parameters()))
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        detail = "; ".join(part for part in (f"missing {', '.join(missing[:4])}" if missing else "",
                                             f"unexpected {', '.join(extra[:4])}" if extra else "") if part)
        raise CheckFailure(f"{what} has the wrong parameters ({detail}). {how}")


def expect_no_dropout_in_eval(what: str, run: Callable[[], torch.Tensor], where: str = "") -> None:
    """In eval() mode dropout is off: two runs of ``run`` give the same output."""
    if not torch.equal(run(), run()):
        raise CheckFailure(
            f"{what} gives different outputs for the same input in eval() mode"
            f"{' in ' + where if where else ''}: dropout is still on. Use nn.Dropout modules (off in eval "
            "mode), not F.dropout(..., training=True) or a module you switch to train() yourself.")
