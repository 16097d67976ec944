"""One mistake, one exercise: an exercise is graded on the references of the pieces it builds on.

``scaled_dot_product_attention`` calls the learner's ``softmax``, ``Transformer`` their
``causal_mask`` and ``padding_mask``: while an exercise is checked, those names in the learner's
namespace stand for the references below, so a mistake in a piece costs that piece's exercise only
(the piece's own check names it). An exercise lists what it builds on in ``Exercise.builds_on``.
Every reference here is written from primitives, so no tripwire of the exercise it sits in
(:mod:`course.checking.forbidden`) fires on it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping

import torch
from torch import nn


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """10.2's softmax, stable: the row maximum subtracted before exp."""
    exps = (x - x.amax(dim=dim, keepdim=True)).exp()
    return exps / exps.sum(dim=dim, keepdim=True)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, n, d = x.shape  # batch, sequence, d_model
    return x.reshape(B, n, num_heads, d // num_heads).transpose(1, 2)  # (B, h, n, d_h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).reshape(B, n, h * d_h)  # (B, n, d_model)


def causal_mask(n: int, device=None) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()  # (n, n), True = may attend


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, n), True = a real token


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """10.4's table (max_len, d_model), float32, computed in float64."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    omega = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (ceil(d / 2),)
    angle = position * omega
    pe = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)[:, :d_model]  # s0 c0 s1 c1 ...
    return pe.float()


class FeedForward(nn.Module):
    """10.5's feed-forward network: linear1, the activation, dropout, linear2."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        activations = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in activations:
            raise ValueError(f"activation must be 'relu' or 'gelu', not {activation!r}")
        self.activation, self.dropout = activations[activation](), nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # (B, n, d_model)


class MultiHeadAttention(nn.Module):
    """10.3's attention (w_q, w_k, w_v, w_o, num_heads), the softmax written out."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(w(t), self.num_heads) for w, t in ((self.w_q, query), (self.w_k, key),
                                                                 (self.w_v, value)))  # (B, h, n, d_h)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, h, n_q, n_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = softmax(scores)
        return self.w_o(merge_heads(weights @ v)), weights


class DecoderBlock(nn.Module):
    """10.6's decoder block: self-attention, cross-attention, feed-forward, each with its LayerNorm."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.self_attn, self.cross_attn = MultiHeadAttention(d_model, num_heads), MultiHeadAttention(d_model,
                                                                                                     num_heads)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropouts = nn.ModuleList(nn.Dropout(dropout) for _ in range(3))
        self.norm_first = norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        sublayers = ((lambda y: self.self_attn(y, y, y, tgt_mask)[0], self.norm1),
                     (lambda y: self.cross_attn(y, memory, memory, memory_mask)[0], self.norm2),
                     (self.ffn, self.norm3))
        for (sublayer, norm), dropout in zip(sublayers, self.dropouts):
            x = x + dropout(sublayer(norm(x))) if self.norm_first else norm(x + dropout(sublayer(x)))
        return x  # (B, n_tgt, d_model)


def namespaces(impl) -> list[dict]:
    """The global namespaces learner code ``impl`` (a function, a class, a method) looks names up in."""
    if isinstance(impl, type):
        own = [k for k in impl.__mro__ if not k.__module__.startswith(("torch", "builtins"))]
        functions = [f for k in own for f in map(inspect.unwrap, vars(k).values()) if inspect.isfunction(f)]
    else:
        functions = [inspect.unwrap(getattr(impl, "__func__", impl))]
    found: dict[int, dict] = {}
    for function in functions:
        space = getattr(function, "__globals__", None)
        if isinstance(space, dict) and space.get("__name__") not in ("torch", "builtins"):
            found.setdefault(id(space), space)
    return list(found.values())


#: The names of the references standing in now. Code of this module is the shipped checks' own: learner
#: code that runs it outside a reference standing in earns nothing (``watching_shipped_checks``).
STANDING_IN: set[str] = set()


def standing_in(frame) -> bool:
    """Does ``frame``, of this module's code, run on behalf of a reference standing in now?"""
    while frame is not None:
        code = frame.f_code
        if code.co_filename == __file__ and code.co_qualname.split(".")[0] in STANDING_IN:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def reference_pieces(impl, pieces: Mapping[str, Callable]) -> Iterator[None]:
    """While checking ``impl``, each name of ``pieces`` that its namespace defines stands for the
    reference given; the learner's own come back afterwards, whatever happened."""
    swapped: list[tuple[dict, str, object]] = []
    names = {getattr(r, "__name__", "") for r in pieces.values()} - STANDING_IN
    try:
        for space in namespaces(impl) if pieces else ():
            for name, reference in pieces.items():
                if name in space and space[name] is not reference:
                    swapped.append((space, name, space[name]))
                    space[name] = reference
        STANDING_IN.update(names)
        yield
    finally:
        STANDING_IN.difference_update(names)
        for space, name, own in reversed(swapped):
            space[name] = own
