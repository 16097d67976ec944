"""LlamaBlock: right answers written differently, and planted bugs (built on the notebook's parts)."""

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_7.llama_block import (
    BASE_IGNORED,
    EPS_IGNORED,
    FLOAT32_INSIDE,
    MASK_IGNORED,
    NO_ROTARY,
    POST_NORM,
    ROTARY_HALVES,
    ROTARY_ON_V,
    ROTARY_WHOLE,
)
from tests.answers import bug, on_a_fixed_device, right
from tests.answers.s10_7.rms_norm import Float32Inside, LayerNormLike

EXERCISE = "LlamaBlock"


def complex_rotary(t, base, inside=torch.float64):
    """Meta's Llama code: each pair (2i, 2i+1) as a complex number, times e^{i p theta_i} (computed in
    ``inside``: float64 here, float32 in Meta's code)."""
    n, d = t.shape[-2:]
    theta = base ** (-torch.arange(0, d, 2, dtype=inside, device=t.device) / d)  # (d/2,)
    angles = torch.outer(torch.arange(n, dtype=inside, device=t.device), theta)  # (n, d/2)
    pairs = torch.view_as_complex(t.to(inside).reshape(*t.shape[:-1], d // 2, 2).contiguous())  # (.., n, d/2)
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2).to(t.dtype)


class SwappedGate(nn.Module):
    """A wrong SwiGLU (the gate on w3's branch): SwiGLU's mistake, not LlamaBlock's."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)

    def forward(self, x):
        return self.w2(self.w1(x) * torch.nn.functional.silu(self.w3(x)))


class Projections(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=False))


def family(ns):
    """LlamaBlock classes on the notebook's RMSNorm, SwiGLU and attention; options switch on bugs."""
    RMSNorm, SwiGLU, apply_rotary = ns["RMSNorm"], ns["SwiGLU"], ns["apply_rotary"]
    attend, split_heads = ns["scaled_dot_product_attention"], ns["split_heads"]
    merge_heads = ns["merge_heads"]

    class Written(nn.Module):
        """A right answer: the learner's parts, its own projection container."""

        norm_first, rotary, masked, keep_eps, keep_base = True, "qk", True, True, True
        Norm, FeedForward = RMSNorm, SwiGLU  # the notebook's, unless a variant brings its own

        def __init__(self, d_model, num_heads, d_ff, eps=1e-6, base=10000.0):
            super().__init__()
            self.h, self.base = num_heads, base if self.keep_base else 10000.0
            self.norm1 = self.Norm(d_model, eps) if self.keep_eps else self.Norm(d_model)
            self.norm2 = self.Norm(d_model, eps) if self.keep_eps else self.Norm(d_model)
            self.attn = Projections(d_model)
            self.ffn = self.FeedForward(d_model, d_ff)

        def turn(self, t):
            return apply_rotary(t, base=self.base)

        def attention(self, x, mask):
            q, k, v = self.attn.w_q(x), self.attn.w_k(x), self.attn.w_v(x)  # (B, n, d)
            if self.rotary == "whole":
                q, k = self.turn(q), self.turn(k)
            q, k, v = (split_heads(t, self.h) for t in (q, k, v))  # (B, h, n, d_k)
            if self.rotary in ("qk", "qkv"):
                q, k = self.turn(q), self.turn(k)
            if self.rotary == "qkv":
                v = self.turn(v)
            out, _ = attend(q, k, v, mask if self.masked else None)
            return self.attn.w_o(merge_heads(out))

        def forward(self, x, mask=None):
            if not self.norm_first:
                x = self.norm1(x + self.attention(x, mask))
                return self.norm2(x + self.ffn(x))
            x = x + self.attention(self.norm1(x), mask)
            return x + self.ffn(self.norm2(x))

    class RotateHalf(Written):
        """Hugging Face's Llama rotary: rotate_half pairs feature i with feature i + d_k/2."""

        def turn(self, t):
            n, d = t.shape[-2:]
            inv = self.base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=t.device) / d)  # (d/2,)
            freqs = torch.arange(n, dtype=torch.float64, device=t.device)[:, None] * inv  # (n, d/2)
            emb = torch.cat([freqs, freqs], dim=-1)  # (n, d)
            x1, x2 = t[..., : d // 2], t[..., d // 2:]
            return t * emb.cos().to(t.dtype) + torch.cat([-x2, x1], dim=-1) * emb.sin().to(t.dtype)

    class Complex(Written):
        """A right answer: rotary as complex multiplication, scores and softmax written out, nn.RMSNorm."""

        def __init__(self, d_model, num_heads, d_ff, eps=1e-6, base=10000.0):
            super().__init__(d_model, num_heads, d_ff, eps, base)
            self.norm1, self.norm2 = nn.RMSNorm(d_model, eps=eps), nn.RMSNorm(d_model, eps=eps)

        def attention(self, x, mask):
            B, n, d = x.shape
            q, k, v = (w(x).view(B, n, self.h, d // self.h).transpose(1, 2)
                       for w in (self.attn.w_q, self.attn.w_k, self.attn.w_v))
            q, k = complex_rotary(q, self.base), complex_rotary(k, self.base)
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (d // self.h) ** 0.5
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            out = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)
            return self.attn.w_o(out.transpose(1, 2).reshape(B, n, d))

    class Float32Attention(Written):
        """Meta's Llama attention: q and k turned, the softmax taken, in float32, each cast back."""

        def attention(self, x, mask):
            B, n, d = x.shape
            q, k, v = (w(x).view(B, n, self.h, d // self.h).transpose(1, 2)
                       for w in (self.attn.w_q, self.attn.w_k, self.attn.w_v))
            q, k = (complex_rotary(t, self.base, torch.float32) for t in (q, k))
            scores = q @ k.transpose(-2, -1) / (d // self.h) ** 0.5
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores.float(), dim=-1).type_as(q)
            return self.attn.w_o((weights @ v).transpose(1, 2).reshape(B, n, d))

    class CallsReference(Written):
        def attention(self, x, mask):
            q, k, v = (split_heads(w(x), self.h) for w in (self.attn.w_q, self.attn.w_k, self.attn.w_v))
            out = F.scaled_dot_product_attention(self.turn(q), self.turn(k), v, attn_mask=mask)
            return self.attn.w_o(merge_heads(out))

    class WithBias(Written):
        def __init__(self, d_model, *args, **kwargs):
            super().__init__(d_model, *args, **kwargs)
            self.attn = ns["MultiHeadAttention"](d_model, self.h, bias=True)

    def variant(**switches):
        return type("Planted", (Written,), switches)

    return {"Written": Written, "Complex": Complex, "RotateHalf": RotateHalf,
            "CallsReference": CallsReference, "WithBias": WithBias, "Float32Attention": Float32Attention,
            "variant": variant}


def answers(solution):
    c = family(solution)
    v = c["variant"]
    return [
        right("solution", solution["LlamaBlock"]),
        right("LlamaBlockWritten", c["Written"]),
        right("complex rotary, einsum attention, nn.RMSNorm", c["Complex"]),
        # one mistake costs one exercise: a wrong part is graded by its own exercise, not the block's
        right("on Llama's float32-inside RMSNorm", v(Norm=Float32Inside)),
        right("on an RMSNorm that centres x", v(Norm=LayerNormLike)),
        right("on a SwiGLU with the gate swapped", v(FeedForward=SwappedGate)),
        bug("rotary on v too", v(rotary="qkv"), hidden="differs", mistake=ROTARY_ON_V),
        bug("no rotary", v(rotary="none"), mistake=NO_ROTARY),
        bug("Hugging Face's rotate_half", c["RotateHalf"], mistake=ROTARY_HALVES),
        bug("rotary over d_model before the heads", v(rotary="whole"), mistake=ROTARY_WHOLE),
        bug("post-norm", v(norm_first=False), mistake=POST_NORM),
        bug("mask ignored", v(masked=False), mistake=MASK_IGNORED),
        bug("eps not passed to the norms", v(keep_eps=False), hidden="differs", mistake=EPS_IGNORED),
        bug("base ignored", v(keep_base=False), mistake=BASE_IGNORED),
        bug("rotary and softmax in float32 (Meta's)", c["Float32Attention"],
            hidden="float64.*float32 rounding", mistake=FLOAT32_INSIDE),
        bug("projections with biases", c["WithBias"], hidden="wrong parameters"),
        bug("calls F.scaled_dot_product_attention", c["CallsReference"],
            hidden="No credit.*scaled_dot_product"),
        bug("output on a fixed device", on_a_fixed_device(c["Written"]), hidden="without a device"),
    ]
