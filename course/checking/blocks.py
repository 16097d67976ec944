"""The contract's Transformer blocks next to PyTorch's layers: parameter names, structure, weights
copied into ``nn.TransformerEncoderLayer`` / ``nn.TransformerDecoderLayer``, masks in their
polarity, dropout that must be off in ``eval()`` mode, and the scale of what it keeps in ``train()``
mode (:func:`kept_scale`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course.checking.failure import CheckFailure
from course.checking.mistakes import Mistake
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


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's ``F.rms_norm`` over the last dimension (torch 2.4 on); on an older torch, its formula
    from primitives, ``x * rsqrt(mean(x**2) + eps) * weight`` (the notebooks run on torch 2.1 on)."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight  # (..., d)


def torch_mask(mask: torch.Tensor | None, B: int, h: int, n_q: int, n_k: int) -> torch.Tensor | None:
    """Our mask (True = may attend, broadcastable) as PyTorch's attn_mask (B*h, n_q, n_k), True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)


def _torch_slot(layer: nn.Module, name: str) -> tuple[torch.Tensor, int | None]:
    """Where our parameter ``name`` lives in an nn.Transformer*Layer: (tensor, chunk of 3 or None).

    ``self_attn.w_k.weight`` is chunk 1 of ``self_attn.in_proj_weight``; ``cross_attn`` is PyTorch's
    ``multihead_attn``; ``ffn.linear1`` is ``linear1``; norms keep their names.
    """
    parts = name.split(".")
    if parts[0] in ("self_attn", "cross_attn"):
        attention = getattr(layer, "self_attn" if parts[0] == "self_attn" else "multihead_attn")
        if parts[1] == "w_o":
            return getattr(attention.out_proj, parts[2]), None
        return getattr(attention, f"in_proj_{parts[2]}"), ATTENTION.index(parts[1])
    if parts[0] == "ffn":
        return getattr(getattr(layer, parts[1]), parts[2]), None
    return getattr(getattr(layer, parts[0]), parts[1]), None


def _ours(values: Mapping[str, torch.Tensor] | nn.Module, prefix: str) -> dict[str, torch.Tensor]:
    """A block's values by the contract's names, ``prefix`` taken off (a module: its parameters)."""
    if isinstance(values, nn.Module):
        values = dict(values.named_parameters())
    return {name[len(prefix):]: v for name, v in values.items() if name.startswith(prefix)}


def copy_into_torch(layer: nn.Module, values: Mapping[str, torch.Tensor] | nn.Module, *, prefix: str = "",
                    swap: dict[str, str] | None = None) -> nn.Module:
    """Load an encoder or decoder block's values (a block, or values by our names, ``prefix`` + name)
    into an nn.Transformer*Layer; returns the layer. ``swap`` maps norms to other norms
    (``{"norm1": "norm2"}`` loads our norm2 into PyTorch's norm1)."""
    mine = _ours(values, prefix)
    with torch.no_grad():
        for name in mine:
            norm, _, kind = name.partition(".")
            tensor, chunk = _torch_slot(layer, name)
            source = mine[f"{(swap or {}).get(norm, norm)}.{kind}"]
            (tensor if chunk is None else tensor.chunk(3)[chunk]).copy_(source)
    return layer


def torch_grads(layer: nn.Module, names, prefix: str = "") -> dict[str, torch.Tensor]:
    """The gradients of a torch layer's parameters (after a backward pass), under our names
    (``grad <prefix><name>`` for each of ``names`` that starts with ``prefix``)."""
    grads = {}
    for full in names:
        if full.startswith(prefix):
            tensor, chunk = _torch_slot(layer, full[len(prefix):])
            grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
            grads[f"grad {full}"] = grad if chunk is None else grad.chunk(3)[chunk]
    return grads


def block_shapes(d_model: int, d_ff: int, decoder: bool = False) -> dict[str, tuple[int, ...]]:
    """The contract's parameter names and shapes of a TransformerBlock (or DecoderBlock), in order."""
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


#: The kind of case that measures dropout's scale: random masks, so only the scale of what it keeps
#: is compared (the same words in every exercise that has one).
DROPPING = "dropout between 0 and 1 in train() mode"
UNSCALED_DROPOUT = Mistake(
    "unscaled_dropout", "a dropout that zeroes entries but leaves the kept ones unscaled (no division by "
    "1 - p)",
    "In train() mode dropout keeps each entry with probability 1 - p and divides what it keeps by 1 - p, so "
    "that the expected sum is the same as in eval() mode: nn.Dropout and F.dropout do both.")


def dropout_scale(p: float, device) -> torch.Tensor:
    """What nn.Dropout(p) multiplies the entries it keeps by, 1 / (1 - p): a 0-d float64 tensor."""
    return torch.tensor(1 / (1 - p), dtype=torch.float64, device=device)


def unscaled_scale(device) -> torch.Tensor:
    """The scale of :data:`UNSCALED_DROPOUT`'s kept entries: 1."""
    return torch.tensor(1.0, dtype=torch.float64, device=device)


def kept_scale(pairs: Iterable[tuple[torch.Tensor | None, torch.Tensor | None]]) -> torch.Tensor:
    """From ``(dropped, gained)`` pairs: what went into a dropout and what came out of it (a residual
    stream's gain over a sublayer, a layer's input), the median of ``gained / dropped`` at the entries
    dropout kept, a 0-d float64 tensor: 1 / (1 - p) for nn.Dropout; NaN when a piece is missing or nothing
    was dropped (no dropout acts there)."""
    nan = torch.tensor(float("nan"), dtype=torch.float64)
    ratios, zeroed = [], 0
    for dropped, gained in pairs:
        if dropped is None or gained is None or dropped.shape != gained.shape:
            return nan
        dropped, gained = dropped.detach().double(), gained.detach().double()
        seen = dropped.abs() > 1e-3
        kept = (gained.abs() > 1e-9) & seen
        zeroed += int((seen & ~kept).sum())
        ratios.append(gained[kept] / dropped[kept])
    ratios = torch.cat(ratios) if ratios else torch.zeros(0, dtype=torch.float64)
    if not ratios.numel() or not zeroed:  # nothing kept, or nothing dropped here: no dropout at this place
        return nan
    return ratios.median()


def recorded(module: nn.Module, call: Callable[[], torch.Tensor], outputs: Iterable[str] = (),
             inputs: Iterable[str] = ()) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``call()``'s result (detached) and what the submodules named in ``outputs`` returned and those in
    ``inputs`` read (``"<name> in"``), at their first call, detached."""
    seen: dict[str, torch.Tensor] = {}

    def keep(name, value):
        value = value[0] if isinstance(value, tuple) else value
        if isinstance(value, torch.Tensor):
            seen.setdefault(name, value.detach())

    hooks = [module.get_submodule(n).register_forward_hook(lambda m, a, out, n=n: keep(n, out))
             for n in outputs]
    hooks += [module.get_submodule(n).register_forward_pre_hook(lambda m, a, n=n: keep(f"{n} in", a[0]))
              for n in inputs]
    try:
        return call().detach(), seen
    finally:
        for hook in hooks:
            hook.remove()
