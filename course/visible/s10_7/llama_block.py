"""Visible check of ``LlamaBlock(d_model, num_heads, d_ff, eps=1e-6, base=10000.0)``, and its known mistakes.

The reference is assembled from PyTorch's primitives holding the learner's weights:
``F.rms_norm`` (``nn.RMSNorm``'s function), ``F.linear`` for the projections, the rotary turn of
10.4 on q and k written from its formula (angles in float64), ``F.scaled_dot_product_attention``
with the mask, and SwiGLU as ``F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    compare_outputs,
    expect_shape,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.visible.s10_7.swiglu import swiglu

HOW = ("LlamaBlock needs norm1 and norm2 (RMSNorm(d_model, eps)), attn with w_q, w_k, w_v, w_o (each "
       "nn.Linear(d_model, d_model, bias=False)) and ffn (SwiGLU(d_model, d_ff)).")
ROTARY_ON_V = Mistake("rotary_on_v", "rotary positions applied to v as well as q and k",
                      "Turn q and k only: positions enter through the scores q·k; v carries content.")
NO_ROTARY = Mistake("no_rotary", "no rotary positions: q and k not turned",
                    "After splitting the heads, turn q and k with apply_rotary (positions 0 .. n-1).")
ROTARY_WHOLE = Mistake(
    "rotary_whole", "rotary positions applied over the whole d_model before the heads are split",
    "Split q and k into heads (B, h, n, d_k) first, then apply_rotary: each head turns its own d_k features, "
    "with frequencies base^(-2i/d_k).")
POST_NORM = Mistake("post_norm", "post-norm: a norm after each residual sum, not before each sublayer",
                    "Pre-norm: h = x + attention(norm1(x)), then h + ffn(norm2(h)).")
MASK_IGNORED = Mistake("mask_ignored", "the mask ignored: every token attends to every other",
                       "Pass the mask to the attention (True = may attend).")
EPS_IGNORED = Mistake("eps_ignored", "the eps argument not passed on to the norms (always 1e-6)",
                      "Create both norms with the block's eps: RMSNorm(d_model, eps).")
BASE_IGNORED = Mistake("base_ignored", "the base argument not passed on to apply_rotary (always 10000)",
                       "Turn q and k with the block's base: apply_rotary(..., base=base).")
AGAINST = "RMSNorm, rotary q and k, F.scaled_dot_product_attention and SwiGLU with the same weights"
SWITCHES = {ROTARY_ON_V: {"rotary": "qkv"}, NO_ROTARY: {"rotary": "none"}, ROTARY_WHOLE: {"rotary": "whole"},
            POST_NORM: {"norm_first": False}, MASK_IGNORED: {"masked": False}, EPS_IGNORED: {"eps": 1e-6},
            BASE_IGNORED: {"base": 10000.0}}


@dataclass(frozen=True)
class Config:
    d_model: int
    num_heads: int
    d_ff: int
    eps: float | None = None  # None: the default
    base: float | None = None  # None: the default

    def args(self) -> tuple:
        return (self.d_model, self.num_heads, self.d_ff)

    def kwargs(self) -> dict:
        return {k: v for k, v in (("eps", self.eps), ("base", self.base)) if v is not None}

    def shapes(self) -> dict[str, tuple]:
        d, d_ff = self.d_model, self.d_ff
        return {"norm1.weight": (d,), "norm2.weight": (d,), **{f"attn.w_{w}.weight": (d, d) for w in "qkvo"},
                "ffn.w1.weight": (d_ff, d), "ffn.w2.weight": (d, d_ff), "ffn.w3.weight": (d_ff, d)}


CASES = [  # name, config, B, n, mask ("causal", "padded": causal and padding (B, 1, n, n), None), dtype
    ("causal mask, 2 heads, float32", Config(8, 2, 12), 2, 5, "causal", torch.float32),
    ("no mask, 3 heads of 4, eps=0.1, base=100", Config(12, 3, 6, 0.1, 100.0), 2, 4, None, torch.float64),
    ("causal and padding mask (B, 1, n, n), 4 heads of 2", Config(8, 4, 10), 2, 6, "padded", torch.float64),
    ("one token, causal", Config(4, 2, 6), 3, 1, "causal", torch.float64),
]


def seeded_values(cfg: Config, seed: int, dtype, device="cpu") -> dict[str, torch.Tensor]:
    """Seeded values for every parameter (norm weights around 1)."""
    g = generator(seed + 7331)
    return {name: randn(shape, g, dtype, device, 0.5) + (1 if name.startswith("norm") else 0)
            for name, shape in cfg.shapes().items()}


def make_mask(kind: str | None, B: int, n: int, device="cpu") -> torch.Tensor | None:
    """None, the causal mask (n, n), or causal and padding (B, 1, n, n) with row 0's last 2 keys padded."""
    if kind is None:
        return None
    causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()  # (n, n), True = may attend
    if kind == "causal":
        return causal
    real = torch.ones(B, n, dtype=torch.bool, device=device)
    real[0, n - 2:] = False
    return causal & real[:, None, None, :]  # (B, 1, n, n)


def _turned(t: torch.Tensor, base: float) -> torch.Tensor:
    """t (..., n, d) with pair i of position p turned by p * base^(-2i/d), angles in float64."""
    n, d = t.shape[-2:]
    angle = torch.arange(n, dtype=torch.float64, device=t.device)[:, None] * base ** (
        -torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)  # (n, d/2)
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
    a, b = t[..., 0::2], t[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def reference_block(p: dict[str, torch.Tensor], x, mask, cfg: Config, *, rotary="qk", norm_first=True,
                    masked=True, eps=None, base=None) -> torch.Tensor:
    """The block through PyTorch's primitives holding ``p``; the keywords switch on known mistakes (eps
    and base: the values used instead of the config's)."""
    B, n, d = x.shape
    h, eps, base = cfg.num_heads, eps or cfg.eps or 1e-6, base or cfg.base or 10000.0

    def norm(t, i):
        return F.rms_norm(t, (d,), p[f"norm{i}.weight"], eps)

    def heads(t):
        return t.view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d_k)

    def attention(t):
        q, k, v = (F.linear(t, p[f"attn.w_{w}.weight"]) for w in "qkv")  # (B, n, d) each
        if rotary == "whole":
            q, k = _turned(q, base), _turned(k, base)
        q, k, v = heads(q), heads(k), heads(v)
        if rotary in ("qk", "qkv"):
            q, k = _turned(q, base), _turned(k, base)
        if rotary == "qkv":
            v = _turned(v, base)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if masked else None)  # (B, h, n, d_k)
        return F.linear(out.transpose(1, 2).reshape(B, n, d), p["attn.w_o.weight"])

    def ffn(t):
        return swiglu(t, {k.removeprefix("ffn."): v for k, v in p.items() if k.startswith("ffn.")})

    if not norm_first:
        x = norm(x + attention(x), 1)
        return norm(x + ffn(x), 2)
    x = x + attention(norm(x, 1))
    return x + ffn(norm(x, 2))  # (B, n, d)


def outputs(forward, x, leaves: dict[str, torch.Tensor], seed: int):
    """``forward(x)`` on a fresh x, with the gradients of x and of every parameter."""
    x = x.detach().clone().requires_grad_()
    return with_gradients(lambda: (forward(x),), ("output",), {"x": x, **leaves}, seed)


def case_inputs(cfg: Config, B: int, n: int, mask: str | None, dtype, seed: int, device="cpu"):
    """Seeded x (B, n, d_model), the mask and the parameters' values."""
    x = randn((B, n, cfg.d_model), generator(seed), dtype, device)
    return x, make_mask(mask, B, n, device), seeded_values(cfg, seed, dtype, device)


def reference_outputs(cfg: Config, x, mask, values, seed: int, **switch):
    leaves = {k: v.detach().clone().requires_grad_() for k, v in values.items()}
    return outputs(lambda t: reference_block(leaves, t, mask, cfg, **switch), x, leaves, seed)


def variants(cfg: Config, x, mask, values, seed: int) -> dict:
    return {m: functools.partial(reference_outputs, cfg, x, mask, values, seed, **s)
            for m, s in SWITCHES.items()}


def expect_layout(block, cfg: Config) -> None:
    """The contract's parameters by name and shape, and nothing else."""
    if not isinstance(block, nn.Module):
        raise CheckFailure(f"LlamaBlock(...) should create an nn.Module, not a {type(block).__name__}.")
    have, want = dict(block.named_parameters()), cfg.shapes()
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing or extra:
        detail = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                             f"unexpected {', '.join(extra)}" if extra else "") if part)
        raise CheckFailure(f"LlamaBlock has the wrong parameters ({detail}). {HOW}")
    for name, shape in want.items():
        if tuple(have[name].shape) != shape:
            raise CheckFailure(f"LlamaBlock: parameter {name} has shape {tuple(have[name].shape)}, expected "
                               f"{shape}. {HOW}")


def build(LlamaBlock, cfg: Config, call=call_learner):
    text = ", ".join([*map(str, cfg.args()), *(f"{k}={v}" for k, v in cfg.kwargs().items())])
    block = call("LlamaBlock", f"LlamaBlock({text})", LlamaBlock, *cfg.args(), **cfg.kwargs())
    expect_layout(block, cfg)
    return block


def learner_outputs(block, x, mask, values, where: str, seed: int, call=call_learner):
    """The learner's block holding ``values``: output and gradients; ``call`` runs learner code."""
    params = dict(block.named_parameters())
    with torch.no_grad():
        for name, value in values.items():
            params[name].copy_(value)
    block.zero_grad()

    def forward(t):
        out = expect_tensor(call("LlamaBlock.forward", where, block, t, mask), "LlamaBlock.forward", where)
        expect_shape(out, t.shape, "LlamaBlock.forward", where)
        return out
    return outputs(forward, x, {name: params[name] for name in values}, seed)


@visible_check
def check_LlamaBlock(LlamaBlock) -> None:
    """Layout, then output and gradients against PyTorch's primitives with the same weights."""
    for seed, (case, cfg, B, n, mask, dtype) in enumerate(CASES):
        where = f"case '{case}'"
        block = build(LlamaBlock, cfg).to(dtype)
        x, mask_, values = case_inputs(cfg, B, n, mask, dtype, seed)
        got = learner_outputs(block, x, mask_, values, where, seed)
        compare_outputs(got, reference_outputs(cfg, x, mask_, values, seed), "LlamaBlock", where,
                        against=AGAINST, variants=variants(cfg, x, mask_, values, seed))
    passed("LlamaBlock is pre-norm with RMSNorm, turns q and k (not v) of every head by its position, "
           "attends with the mask and ends with SwiGLU; outputs and gradients match.")
