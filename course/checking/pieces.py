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


#: The code of the references standing in now: learner code calling them is no call to the shipped
#: checks (:func:`course.checking.forbidden.watching_shipped_checks`); calling one elsewhere still is.
STANDING_IN: set = set()


@contextlib.contextmanager
def reference_pieces(impl, pieces: Mapping[str, Callable]) -> Iterator[None]:
    """While checking ``impl``, each name of ``pieces`` that its namespace defines stands for the
    reference given; the learner's own come back afterwards, whatever happened."""
    swapped: list[tuple[dict, str, object]] = []
    codes = {getattr(inspect.unwrap(r), "__code__", None) for r in pieces.values()} - STANDING_IN - {None}
    try:
        for space in namespaces(impl) if pieces else ():
            for name, reference in pieces.items():
                if name in space and space[name] is not reference:
                    swapped.append((space, name, space[name]))
                    space[name] = reference
        STANDING_IN.update(codes)
        yield
    finally:
        STANDING_IN.difference_update(codes)
        for space, name, own in reversed(swapped):
            space[name] = own
