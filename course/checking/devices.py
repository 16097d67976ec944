"""Tensors made on a fixed device, found on the CPU alone: the same probe on both sides.

Code that creates a tensor without ``device=`` (``torch.arange(n)`` inside ``apply_rotary``)
is right on the CPU and fails on a GPU. :func:`check_unplaced_tensors` runs learner code on
CPU inputs with every tensor a factory function creates without a device moved to PyTorch's
'meta' device: an unplaced tensor then meets the CPU inputs and fails with a device mismatch,
on any machine. Code that places its tensors (``device=x.device``) never touches 'meta', so a
right answer pays nothing; a visible check adopts it with one line after its cases.

A tensor moved to the CPU by name (``t.cpu()``, ``t.to("cpu")``) is on the CPU on any machine:
it goes to 'meta' as well. A tensor on 'meta' moved to a device given by a tensor or a
``torch.device`` (``t.to(x.device)``, ``t.to(x)``, ``t.type_as(x)``, ``y.copy_(t)``) is where the
code puts it on a GPU too: it comes back as a stand-in of zeros on that device, and the run goes
on (its values are not looked at: only a device mismatch counts).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from course.checking.failure import CheckFailure

#: Factory functions that create a tensor from scratch, on the default device unless told.
FACTORIES = frozenset(f"torch.{name}" for name in (
    "arange", "zeros", "ones", "full", "empty", "tensor", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "randperm", "as_tensor", "empty_strided"))

UNPLACED = ("{exercise} creates a tensor without a device (torch.arange(n), torch.zeros(...)): it lands "
            "on the CPU even when the inputs are on a GPU, and fails there. Create new tensors with "
            "device=x.device (or torch.zeros_like(x), x.new_ones(...)).")


#: Moves to a device given by a tensor or a ``torch.device``: a tensor on 'meta' becomes a stand-in.
MOVES = frozenset(f"torch.Tensor.{name}" for name in ("to", "type_as", "copy_"))


def _names_the_cpu(name: str, args, kwargs) -> bool:
    """``t.cpu()``, ``t.to("cpu")``, ``t.to(device="cpu")``: the CPU by name, on any machine."""
    if name == "torch.Tensor.cpu":
        return True
    given = [*args[1:], kwargs.get("device")]
    return name == "torch.Tensor.to" and any(isinstance(a, str) and a.startswith("cpu") for a in given)


def _moves_to_a_device(name: str, args, kwargs) -> bool:
    """A move whose target comes from a tensor or a ``torch.device`` (``x.device``)."""
    if name != "torch.Tensor.to":
        return name in MOVES
    given = [*args[1:], kwargs.get("device")]
    return any(isinstance(a, (torch.Tensor, torch.device)) for a in given)


def _stand_in(t):
    if isinstance(t, torch.Tensor) and t.is_meta:
        return torch.zeros(t.shape, dtype=t.dtype)
    return t


class UnplacedOnMeta(TorchFunctionMode):
    """Moves every tensor a factory function creates without a ``device``, and every tensor moved
    to the CPU by name, to 'meta'; a 'meta' tensor moved to a given device comes back real.

    0-d tensors stay where they are: they mix with tensors on any device.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = resolve_name(func) or ""
        moved = args[1:2] if name == "torch.Tensor.copy_" else args[:1]  # copy_: into a real tensor
        if _moves_to_a_device(name, args, kwargs) and any(
                isinstance(a, torch.Tensor) and a.is_meta for a in moved) and not (
                name == "torch.Tensor.copy_" and args[0].is_meta):
            return func(*(_stand_in(a) for a in args), **kwargs)
        result = func(*args, **kwargs)
        if not isinstance(result, torch.Tensor) or result.dim() == 0 or result.is_meta:
            return result
        if kwargs.get("device") is None and not (args and isinstance(args[0], torch.Tensor)) \
                and name in FACTORIES:
            return result.to("meta")
        if _names_the_cpu(name, args, kwargs):
            return result.to("meta")
        return result


def is_device_mismatch(error: BaseException) -> bool:
    """Does PyTorch's error say that two tensors are on different devices?"""
    text = str(error)
    return "expected device" in text or "same device" in text


def check_unplaced_tensors(exercise: str, call: Callable[[], object]) -> None:
    """Fail if ``call()`` (learner code on CPU inputs, built outside it) creates a tensor without
    a device; its other errors say nothing about devices and are left to the other checks."""
    try:
        with UnplacedOnMeta():
            call()
    except Exception as error:  # noqa: BLE001 - learner code
        if is_device_mismatch(error) or is_device_mismatch(error.__cause__ or error):
            raise CheckFailure(UNPLACED.format(exercise=exercise)) from None
