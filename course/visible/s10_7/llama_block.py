"""``LlamaBlock(d_model, num_heads, d_ff, eps=1e-6, base=10000.0)``: the exercise (inputs, reference,
known mistakes, visible cases) and its visible check.

The reference is assembled from PyTorch's primitives holding the case's seeded weights:
``F.rms_norm`` (``nn.RMSNorm``'s function; its formula on a torch before 2.4), ``F.linear`` for the
projections, the rotary turn of 10.4 on q and k written from its formula (angles in float64),
``F.scaled_dot_product_attention`` with the mask, and SwiGLU as
``F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    close,
    diagnose,
    expect_shape,
    expect_tensor,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
    with_gradients,
)
from course.checking.blocks import rms_norm
from course.checking.compare import float32_inside
from course.checking.forbidden import ATTENTION, MULTIHEAD
from course.checking.modules import load_parameters
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
ROTARY_HALVES = Mistake(
    "rotary_halves", "q and k turned in the 'rotate_half' layout (Hugging Face's Llama: feature i paired "
    "with feature i + d_k/2) instead of 10.4's neighbouring pairs (2i, 2i+1)",
    "Turn q and k as apply_rotary does: the pairs are neighbouring features (2i, 2i+1) of each head, not "
    "its first and second halves.")
POST_NORM = Mistake("post_norm", "post-norm: a norm after each residual sum, not before each sublayer",
                    "Pre-norm: h = x + attention(norm1(x)), then h + ffn(norm2(h)).")
MASK_IGNORED = Mistake("mask_ignored", "the mask ignored: every token attends to every other",
                       "Pass the mask to the attention (True = may attend).")
EPS_IGNORED = Mistake("eps_ignored", "the eps argument not passed on to the norms (always 1e-6)",
                      "Create both norms with the block's eps: RMSNorm(d_model, eps).")
BASE_IGNORED = Mistake("base_ignored", "the base argument not passed on to apply_rotary (always 10000)",
                       "Turn q and k with the block's base: apply_rotary(..., base=base).")
FLOAT32_INSIDE = Mistake(
    "float32_inside", "LlamaBlock computed partly in float32 (Meta's Llama code turns q and k and takes the "
    "softmax in float32, then casts back): a float64 x comes out with float32's precision",
    "LlamaBlock computes in the dtype of x: look for .float(), .to(torch.float32) or float32 tensors (the "
    "rotary angles may be float64, then cast to the dtype of x) in forward.")
AGAINST = "RMSNorm, rotary q and k, F.scaled_dot_product_attention and SwiGLU with the same weights"
SWITCHES = {ROTARY_ON_V: {"rotary": "qkv"}, NO_ROTARY: {"rotary": "none"}, ROTARY_WHOLE: {"rotary": "whole"},
            ROTARY_HALVES: {"rotary": "halves"},
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


def block_case(name: str, seed: int, cfg: Config, B: int, n: int, mask: str | None, dtype=torch.float64, *,
               kind: str) -> Case:
    """A case: the block's config, x (B, n, d_model) and its mask ("causal"; "padded": causal and
    padding (B, 1, n, n); None)."""
    return Case(name, seed, {"config": cfg, "B": B, "n": n, "mask": mask}, dtype, kind=kind)


CASES = [
    block_case("causal mask, 2 heads, float32", 0, Config(8, 2, 12), 2, 5, "causal", torch.float32,
               kind="causal mask"),
    block_case("no mask, 3 heads of 4, eps=0.1, base=100, float64", 1, Config(12, 3, 6, 0.1, 100.0), 2, 4,
               None, kind="no mask, another eps"),
    block_case("causal and padding mask (B, 1, n, n), 4 heads of 2, float64", 2, Config(8, 4, 10), 2, 6,
               "padded", kind="causal and padding mask"),
    block_case("one token, causal, float64", 3, Config(4, 2, 6), 3, 1, "causal", kind="one token"),
    block_case("causal and padding mask, 2 heads of 4, base=500, float64", 4, Config(8, 2, 12, None, 500.0),
               2, 5, "padded", kind="causal and padding mask, another base"),
]


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


def inputs(case: Case, device):
    """Seeded x (B, n, d_model), a leaf, the mask and the parameters' values (norm weights around 1)."""
    cfg, B, n = case.params["config"], case.params["B"], case.params["n"]
    x = randn((B, n, cfg.d_model), generator(case.seed), case.dtype, device).requires_grad_()
    g = generator(case.seed + 7331)
    values = {name: randn(shape, g, case.dtype, device, 0.5) + (1 if name.startswith("norm") else 0)
              for name, shape in cfg.shapes().items()}
    return x, make_mask(case.params["mask"], B, n, device), values


def _turned(t: torch.Tensor, base: float, halves: bool = False) -> torch.Tensor:
    """t (..., n, d) with pair i of position p turned by p * base^(-2i/d), angles in float64; the pairs are
    features (2i, 2i+1), or (i, i + d/2) with ``halves`` (the known mistake)."""
    n, d = t.shape[-2:]
    angle = torch.arange(n, dtype=torch.float64, device=t.device)[:, None] * base ** (
        -torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)  # (n, d/2)
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)
    if halves:
        a, b = t[..., : d // 2], t[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    a, b = t[..., 0::2], t[..., 1::2]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def reference_block(p: dict[str, torch.Tensor], x, mask, cfg: Config, *, rotary="qk", norm_first=True,
                    masked=True, eps=None, base=None) -> torch.Tensor:
    """The block through PyTorch's primitives holding ``p``; the keywords switch on known mistakes (eps
    and base: the values used instead of the config's)."""
    B, n, d = x.shape
    h, eps, base = cfg.num_heads, eps or cfg.eps or 1e-6, base or cfg.base or 10000.0

    def norm(t, i):
        return rms_norm(t, p[f"norm{i}.weight"], eps)

    def heads(t):
        return t.view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d_k)

    def attention(t):
        q, k, v = (F.linear(t, p[f"attn.w_{w}.weight"]) for w in "qkv")  # (B, n, d) each
        if rotary == "whole":
            q, k = _turned(q, base), _turned(k, base)
        q, k, v = heads(q), heads(k), heads(v)
        if rotary in ("qk", "qkv", "halves"):
            q, k = _turned(q, base, rotary == "halves"), _turned(k, base, rotary == "halves")
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


def outputs(case: Case, device, **switch):
    """The reference's output and the gradients of x and every parameter on a case (``switch``: a
    known mistake's, as reference_block takes it)."""
    x, mask, values = inputs(case, device)
    p = {k: v.requires_grad_() for k, v in values.items()}
    cfg = case.params["config"]
    return with_gradients(lambda: (reference_block(p, x, mask, cfg, **switch),), ("output",), {"x": x, **p},
                          case.seed)


class StandInRMSNorm(nn.Module):
    """nn.RMSNorm's function with the block's weight and eps, in place of the learner's RMSNorm inside the
    block: RMSNorm is graded on its own, so a mistake there costs RMSNorm's points only."""

    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight, self.eps = nn.Parameter(weight.detach().clone()), eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class StandInSwiGLU(nn.Module):
    """The SwiGLU reference with the block's w1, w2, w3, in place of the learner's SwiGLU inside the block."""

    def __init__(self, ffn: nn.Module):
        super().__init__()
        for name in ("w1", "w2", "w3"):
            w = getattr(ffn, name).weight
            setattr(self, name, nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype, device=w.device))

    def forward(self, x):
        return swiglu(x, {f"{k}.weight": getattr(self, k).weight for k in ("w1", "w2", "w3")})


#: Where an RMSNorm keeps its eps: ours and Meta's (eps), Hugging Face's (variance_epsilon), others.
EPS_NAMES = ("eps", "variance_epsilon", "epsilon")


def norm_eps(norm: nn.Module) -> float | None:
    """The eps a learner's RMSNorm module was given, if it keeps it under a known name (else None)."""
    for name in EPS_NAMES:
        value = getattr(norm, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def with_reference_parts(block: nn.Module) -> nn.Module:
    """The learner's block with nn.RMSNorm's function in place of its norm1 and norm2 (with the eps each was
    given) and the SwiGLU reference in place of its ffn, where they have the contract's layout: the block is
    graded on what it does with its parts, each part on its own exercise. PyTorch's own nn.RMSNorm stays."""
    torch_norm = getattr(nn, "RMSNorm", None)
    for name in ("norm1", "norm2"):
        norm, eps = getattr(block, name, None), None
        weight = getattr(norm, "weight", None)
        if isinstance(norm, nn.Module) and not (torch_norm and isinstance(norm, torch_norm)):
            eps = norm_eps(norm)
        if eps is not None and isinstance(weight, torch.Tensor) and weight.dim() == 1:
            setattr(block, name, StandInRMSNorm(weight, eps))
    ffn = getattr(block, "ffn", None)
    if isinstance(ffn, nn.Module) and all(isinstance(getattr(ffn, k, None), nn.Linear) and
                                          getattr(ffn, k).bias is None for k in ("w1", "w2", "w3")) \
            and {n for n, _ in ffn.named_parameters()} == {"w1.weight", "w2.weight", "w3.weight"}:
        block.ffn = StandInSwiGLU(ffn)
    return block


def expect_full_precision(got, want, where: str, variants) -> None:
    """On a float64 case, a result off by float32 rounding only, and like no other known mistake:
    computed in float32 somewhere inside."""
    if not float32_inside(got, want):
        return
    rtol, atol = tolerance(torch.float64)
    off = [k for k, w in want.items() if not close(got[k], w, rtol, atol)]
    if diagnose(got, off[0], variants, rtol, atol, reference=want) is None:
        raise CheckFailure(f"LlamaBlock differs from {AGAINST} in {where} by float32 rounding only (x is "
                           f"float64).\n{FLOAT32_INSIDE.sentence()}", FLOAT32_INSIDE)


class LlamaBlockModule(Exercise):
    forbidden = ATTENTION | MULTIHEAD
    name = "LlamaBlock"
    reference_name = AGAINST
    mistakes = {m: partial(outputs, **switch) for m, switch in SWITCHES.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        cfg = case.params["config"]
        block = with_reference_parts(self.build(impl, case, *cfg.args(), **cfg.kwargs()))
        x, mask, values = inputs(case, device)
        params = load_parameters(block.to(device), values, self.name, HOW)

        def call():
            out = expect_tensor(self.call(case, block, x, mask), "LlamaBlock.forward", case)
            expect_shape(out, x.shape, "LlamaBlock.forward", case)
            return (out,)

        return with_gradients(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return outputs(case, device)

    def evaluate(self, case, got, device):
        variants = {m: partial(run, case, device) for m, run in self.mistakes.items()}
        expect_full_precision(got, self.expected(case, device), str(case), variants)
        super().evaluate(case, got, device)


@visible_check
def check_LlamaBlock(LlamaBlock) -> None:
    """Layout, then output and gradients against PyTorch's primitives with the same weights."""
    LlamaBlockModule().run_cases(LlamaBlock)
    passed("LlamaBlock is pre-norm with RMSNorm, turns q and k (not v) of every head by its position, "
           "attends with the mask and ends with SwiGLU; outputs and gradients match.")
