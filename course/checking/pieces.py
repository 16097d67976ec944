"""One mistake, one exercise: an exercise is graded on the references of the pieces it builds on.

``scaled_dot_product_attention`` calls the learner's ``softmax``, ``Transformer`` their
``causal_mask`` and ``padding_mask``: while an exercise is checked, those names in the learner's
namespace stand for the references below, so a mistake in a piece costs that piece's exercise only
(the piece's own check names it). An exercise lists what it builds on in ``Exercise.builds_on``.
Every reference here is PyTorch's own where PyTorch has one (softmax, the causal mask) and a
short tensor expression otherwise, none of them a tripwire of the exercise it sits in
(:mod:`course.checking.forbidden`). Modules (FeedForward, DecoderBlock) have no stand-in: one
would ship a whole answer in the helpers every release carries, and PyTorch's own layers do not
hold the learner's parameter names, so TransformerBlock and Transformer still run the learner's.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Mapping

import torch
from torch import nn


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """10.2's softmax: PyTorch's own (stable), which 10.2 allows inside attention."""
    return torch.softmax(x, dim=dim)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)  # (B, n, d_model) -> (B, h, n, d_h)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2).flatten(-2)  # (B, h, n, d_h) -> (B, n, d_model)


def causal_mask(n: int, device=None) -> torch.Tensor:
    """10.6's mask from PyTorch's own (-inf above the diagonal, 0 elsewhere): True = may attend."""
    return nn.Transformer.generate_square_subsequent_mask(n, device=device) == 0  # (n, n)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return tokens.ne(pad_id).unsqueeze(-2).unsqueeze(-2)  # (B, n) -> (B, 1, 1, n), True = a real token


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
