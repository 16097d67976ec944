"""One mistake, one exercise: an exercise is graded on the references of the pieces it builds on.

``scaled_dot_product_attention`` calls the learner's ``softmax``, ``Transformer`` their
``causal_mask`` and ``padding_mask``: while an exercise is checked, those names in the learner's
namespace stand for the references below, so a mistake in a piece costs that piece's exercise only
(the piece's own check names it). An exercise lists what it builds on in ``Exercise.builds_on``.
This module ships to learners, so it holds only stand-ins that are PyTorch's own (its softmax,
its causal mask), none of them a tripwire of the exercise it sits in
(:mod:`course.checking.forbidden`). Pieces whose stand-in would be an answer (split and merge
heads, the padding mask, the sinusoidal table) stand in on grading's side only
(``grader/checks/shared_references.py``, the hidden classes' ``builds_on``): there a mistake in
the piece costs the piece alone, while the visible check of the exercise built on it runs the
learner's piece and fails with it. Modules (FeedForward, DecoderBlock) have no stand-in: PyTorch's
own layers do not hold the learner's parameter names.
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


def causal_mask(n: int, device=None) -> torch.Tensor:
    """10.6's mask from PyTorch's own (-inf above the diagonal, 0 elsewhere): True = may attend."""
    return nn.Transformer.generate_square_subsequent_mask(n, device=device) == 0  # (n, n)


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
