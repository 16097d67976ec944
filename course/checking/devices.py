"""Tensors made on a fixed device, found on the CPU alone: one probe for both sides.

Code that creates a tensor without ``device=`` (``torch.arange(n)`` inside ``apply_rotary``) or on
a device named in the code (``device="cpu"``, ``.cpu()``) is right on the CPU and fails on a GPU.
The engine (:meth:`course.checking.Exercise.probe_devices`) finds it on any machine, after the
cases, in two runs of learner code that meet PyTorch's 'meta' device:

- :func:`check_device_independence`: every input on 'meta'; a tensor made on the CPU meets them;
- :func:`check_unplaced_tensors`: CPU inputs, with every tensor learner code makes without a
  device, or moves to the CPU by name, on 'meta' (:class:`UnplacedOnMeta`): this run has real
  values, so code that reads them (a decoding loop that stops at ``eos``) gets far enough.

Code that places its tensors (``device=x.device``) never touches 'meta' in the second run, so a
right answer pays nothing. A tensor on 'meta' moved to a device given by a tensor or a
``torch.device`` (``t.to(x.device)``, ``t.to(x)``, ``t.type_as(x)``, ``y.copy_(t)``) is where the
code puts it on a GPU too: it comes back as a stand-in of zeros on that device, and the run goes
on (its values are not looked at: only a device mismatch counts). So does a value read from a tensor
on 'meta' (``bool(finished.all())``, ``.item()``, ``.tolist()``): zeros, so that the run reaches the
step where the tensor meets the inputs (``finished |= word == eos_id``).
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

#: What both sides say of code that makes a tensor on a fixed device.
FIXED_DEVICE = ("{exercise} creates a tensor on a fixed device (made without a device, as torch.arange(n) "
                "or torch.zeros(...) are, or on the CPU by name): right on the CPU, it fails wherever "
                "the inputs are on another device, such as a GPU. Create new tensors with "
                "device=x.device (or torch.zeros_like(x), x.new_ones(...)).")

#: The exercises the probe cannot apply to, and why (predictions, whose answer is a value, need
#: none either). Every other exercise's visible cases meet 'meta' on both sides.
WITHOUT_DEVICE_PROBE: dict[str, str] = {
    "dot_product_variance": "takes sizes, no tensor: there is no input device to follow",
    "sinusoidal_positional_encoding": "takes sizes, no tensor: there is no input device to follow",
    "relative_shift_matrix": "takes sizes, no tensor: there is no input device to follow",
    "warmup_cosine_lr": "numbers in, a number out",
    "bpe_train": "words in, merges out: no tensor",
    "bpe_encode": "words and merges in, tokens out: no tensor",
    "byte_bpe_train": "texts in, merges of bytes out: no tensor",
    "byte_bpe_encode": "a text and merges in, tokens of bytes out: no tensor",
    "byte_bpe_decode": "tokens of bytes in, a text out: no tensor",
}


#: Reads of a tensor's values: on a tensor on 'meta', those of a stand-in of zeros.
READS = frozenset(f"torch.Tensor.{name}" for name in ("__bool__", "item", "tolist", "__int__", "__float__",
                                                     "__index__"))
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
        if name in READS and args and isinstance(args[0], torch.Tensor) and args[0].is_meta:
            return func(_stand_in(args[0]), *args[1:], **kwargs)
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


def expect_placed(exercise: str, call: Callable[[], object]) -> None:
    """Fail with :data:`FIXED_DEVICE` if ``call()`` fails with a device mismatch; its other errors
    (on 'meta': ``.item()``, unsupported ops) say nothing about devices and are left to the cases."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - learner code
        if is_device_mismatch(error) or is_device_mismatch(error.__cause__ or error):
            raise CheckFailure(FIXED_DEVICE.format(exercise=exercise)) from None


def check_device_independence(exercise: str, call: Callable[[torch.device], object]) -> None:
    """Fail if ``call(device)`` (learner code on inputs it builds on ``device``) meets a tensor of
    another device when every input is on 'meta': it made one on a fixed device."""
    expect_placed(exercise, lambda: call(torch.device("meta")))


def check_unplaced_tensors(exercise: str, call: Callable[[], object]) -> None:
    """Fail if ``call()`` (learner code on CPU inputs, built outside it) creates a tensor without
    a device or moves one to the CPU by name."""
    with UnplacedOnMeta():
        expect_placed(exercise, call)
