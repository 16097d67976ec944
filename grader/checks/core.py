"""The machinery of the hidden checks: cases, running learner code, comparing, diagnosing.

Every exercise is an :class:`Exercise`: it lists its cases, runs an implementation on a
case (forward and backward) and returns named tensors. The learner's tensors are compared
with the live PyTorch reference's; when they differ, the same inputs are run through
known wrong variants ("mistakes") to name the likely bug.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

# The one comparison engine, shared with the visible checks (course/compare.py): the same
# tolerances and the same notion of "close" for what a learner sees and what is graded.
from course.compare import Mistake, close, describe_difference, diagnose, tolerance  # noqa: F401
from course.compare import explain_exception as _explain
from grader.checks.tripwire import Forbidden, watching

Outputs = dict[str, torch.Tensor]


class CheckFailure(AssertionError):
    """A hidden check failed; the message is meant for the learner."""


@dataclass(frozen=True)
class Case:
    """One input configuration. ``params`` holds shapes and options; ``seed`` fixes the data."""

    name: str
    seed: int
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float64

    def __str__(self) -> str:
        return f"case '{self.name}'"


# ---------------------------------------------------------------- device and tolerance


def grading_device() -> torch.device:
    """CUDA when there is a GPU, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextlib.contextmanager
def exact_matmul() -> Iterator[None]:
    """Turn TF32 off while checking, so float32 matmuls on the GPU are really float32."""
    cuda = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = cuda
        torch.backends.cudnn.allow_tf32 = cudnn


def generator(seed: int) -> torch.Generator:
    """A CPU generator: the same numbers on every machine, whatever the device."""
    return torch.Generator().manual_seed(seed)


def randn(shape, g: torch.Generator, dtype: torch.dtype, device: torch.device, scale=1.0):
    """Seeded normal numbers made on the CPU, then moved to ``device``."""
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(device, dtype)


# ---------------------------------------------------------------- running learner code


def forbidden_call_message(exercise: str, hits: set[str]) -> str:
    plain = {hit for hit in hits if "operator" not in hit}  # named by the function, if seen
    names = ", ".join(sorted(plain or hits))
    return (
        f"No credit for {exercise}: it calls {names}, the PyTorch function it is graded "
        "against. Write it from tensor primitives (matmul, exp, sum, masked_fill, ...)."
    )


def explain_exception(exercise: str, error: Exception, case: Case) -> str:
    """A learner-facing sentence for an exception raised by learner code in ``case``."""
    return _explain(exercise, error, str(case))


def call_learner(exercise: str, forbidden: Forbidden, case: Case, fn, *args, **kwargs):
    """Call learner code under the tripwires; turn its exceptions into CheckFailures."""
    try:
        with watching(forbidden) as hits:
            result = fn(*args, **kwargs)
    except CheckFailure:
        raise
    except Exception as error:  # noqa: BLE001 - any learner error becomes a message
        raise CheckFailure(explain_exception(exercise, error, case)) from None
    if hits:
        raise ForbiddenCall(forbidden_call_message(exercise, hits), hits)
    return result


class ForbiddenCall(CheckFailure):
    """Learner code called the reference it is graded against."""

    def __init__(self, message: str, hits: set[str]):
        super().__init__(message)
        self.hits = hits


def expect_tensor(value, what: str, case: Case) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise CheckFailure(f"{what} should be a torch.Tensor, but is a {type(value).__name__} in {case}.")
    return value


def expect_tuple(value, names: tuple[str, ...], what: str, case: Case) -> tuple:
    """Check that learner code returned a tuple of tensors named ``names``."""
    if not isinstance(value, tuple) or len(value) != len(names):
        kind = type(value).__name__ + (f" of length {len(value)}" if isinstance(value, tuple) else "")
        raise CheckFailure(f"{what} should return a tuple ({', '.join(names)}), but returned a {kind}.")
    return tuple(expect_tensor(v, f"{what}'s {n}", case) for v, n in zip(value, names))


# ---------------------------------------------------------------- comparing and diagnosing


def compare_outputs(exercise: str, case: Case, got: Outputs, expected: Outputs,
                    mistakes_for_case: Callable[[], Mapping[str, Outputs]],
                    mistakes: Mapping[str, Mistake], device: torch.device) -> None:
    """Raise a CheckFailure naming the first output that differs, with a diagnosis."""
    rtol, atol = tolerance(case.dtype, device)
    for key, want in expected.items():
        if key not in got:
            raise CheckFailure(f"{exercise}: no {key} was produced in {case}.")
        have = got[key]
        if tuple(have.shape) != tuple(want.shape):
            raise CheckFailure(
                f"{exercise}: {key} should have shape {tuple(want.shape)} in {case}, "
                f"but has shape {tuple(have.shape)}."
            )
        if close(have, want, rtol, atol):
            continue
        message = (f"{exercise}: {key} differs from the PyTorch reference in {case}: "
                   f"{describe_difference(have, want)}.")
        hint = diagnose(key, have, mistakes, mistakes_for_case(), rtol, atol)
        raise CheckFailure(message + (f"\n{hint}" if hint else ""))


def detach_outputs(outputs: Outputs) -> Outputs:
    """Plain CPU tensors, safe to save and compare in another process."""
    return {k: v.detach().as_subclass(torch.Tensor).to("cpu").clone() for k, v in outputs.items()}
