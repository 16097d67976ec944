"""Tensors made on a fixed device, found on the CPU alone: the same probe on both sides.

Code that creates a tensor without ``device=`` (``torch.arange(n)`` inside ``apply_rotary``)
is right on the CPU and fails on a GPU. :func:`check_unplaced_tensors` runs learner code on
CPU inputs with every tensor a factory function creates without a device moved to PyTorch's
'meta' device: an unplaced tensor then meets the CPU inputs and fails with a device mismatch,
on any machine. Code that places its tensors (``device=x.device``) never touches 'meta', so a
right answer pays nothing; a visible check adopts it with one line after its cases.
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


class UnplacedOnMeta(TorchFunctionMode):
    """Moves every tensor a factory function creates without a ``device`` to 'meta'.

    0-d tensors stay where they are: they mix with tensors on any device.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if (kwargs.get("device") is None and isinstance(result, torch.Tensor) and result.dim() > 0
                and not (args and isinstance(args[0], torch.Tensor)) and resolve_name(func) in FACTORIES):
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
