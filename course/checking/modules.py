"""Checks of a learner module's structure: its layers, their shapes, nothing shared by mistake."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

from course.checking.failure import CheckFailure


def expect_linear_layers(module: nn.Module, what: str, shapes: dict[str, tuple], how: str, *,
                         bias: bool) -> None:
    """Submodules that are distinct nn.Linear layers of the given weight shapes, and nothing else."""
    for name, shape in shapes.items():
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            raise CheckFailure(f"{what} needs an nn.Linear called {name}. {how}")
        if tuple(layer.weight.shape) != shape:
            raise CheckFailure(f"{what}.{name}.weight should have shape {shape} (out_features, "
                               f"in_features), not {tuple(layer.weight.shape)}. {how}")
        if (layer.bias is not None) != bias:
            raise CheckFailure(f"{what}.{name} should {'' if bias else 'not '}have a bias "
                               f"(nn.Linear(..., bias={bias})). {how}")
    expect_distinct(module, what, list(shapes), how)
    expected = {f"{n}.{k}" for n in shapes for k in (("weight", "bias") if bias else ("weight",))}
    extra = sorted(set(dict(module.named_parameters())) - expected)
    if extra:
        raise CheckFailure(f"{what} has parameters it should not have: {', '.join(extra)}. {how}")


def expect_distinct(module: nn.Module, what: str, names: Iterable[str], how: str) -> None:
    """Fail when two of the named submodules are one object (two names, one set of weights)."""
    seen: dict[int, str] = {}
    for name in names:
        sub = getattr(module, name)
        if id(sub) in seen:
            raise CheckFailure(
                f"{what}.{name} is the same module as {what}.{seen[id(sub)]}: two names, one set of "
                f"weights, so they can never learn different things. {how}")
        seen[id(sub)] = name


def load_parameters(module: nn.Module, values: Mapping[str, torch.Tensor],
                    exercise: str, how: str) -> dict[str, nn.Parameter]:
    """Copy the check's seeded values into the learner's module, by the contract's names.

    ``how`` tells the learner how the submodules should be created when a name or shape
    is off. Returns the learner's parameters by name, ready to collect gradients from.
    """
    if not isinstance(module, nn.Module):
        raise CheckFailure(f"{exercise} should be an nn.Module subclass; got {type(module).__name__}.")
    params = dict(module.named_parameters())
    missing = [name for name in values if name not in params]
    extra = sorted(set(params) - set(values))
    if missing or extra:
        detail = (f"missing {', '.join(missing)}" if missing else "") + \
                 ("; " if missing and extra else "") + \
                 (f"unexpected {', '.join(extra)}" if extra else "")
        raise CheckFailure(f"{exercise} has the wrong parameters ({detail}). {how}")
    for name, value in values.items():
        if tuple(params[name].shape) != tuple(value.shape):
            raise CheckFailure(f"{exercise}: parameter {name} has shape {tuple(params[name].shape)}, "
                               f"expected {tuple(value.shape)}. {how}")
        with torch.no_grad():
            params[name].copy_(value)
    return {name: params[name] for name in values}
