"""Calling learner code the way grading does: under the tripwires, on the grading device.

:func:`call_guarded` runs learner code while the references it is graded against are
watched (a call to one is a :class:`ForbiddenCall`); :func:`grading_device` and
:func:`exact_matmul` say where and how the cases run; :func:`detach_outputs` makes the
plain tensors a record saves. The case-running engine is :mod:`grader.checks.exercise`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

# The one checking toolkit, shared with the visible checks (course/checking/): the same failure
# type, tolerances, notion of "close" and wording for what a learner sees and what is graded.
from course import checking
from course.checking import CheckFailure, Outputs, close, describe_difference, tolerance  # noqa: F401
from course.checking.exercise import Case  # noqa: F401 - the checks' name for it
from grader.checks.tripwire import Forbidden, watching, watching_shipped_checks

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


generator, randn = checking.generator, checking.randn


# ---------------------------------------------------------------- running learner code


def forbidden_call_message(exercise: str, hits: set[str]) -> str:
    plain = {hit for hit in hits if "operator" not in hit}  # named by the function, if seen
    names = ", ".join(sorted(plain or hits))
    return (
        f"No credit for {exercise}: it calls {names}, the PyTorch function it is graded "
        "against. Write it from tensor primitives (matmul, exp, sum, masked_fill, ...)."
    )


def shipped_call_message(exercise: str, hits: set[str]) -> str:
    return (f"No credit for {exercise}: it calls {', '.join(sorted(hits))}, the course's own checking code, "
            "which holds the reference it is graded against. Write it yourself.")


def call_guarded(exercise: str, forbidden: Forbidden, case: Case, fn, *args, **kwargs):
    """Call learner code under the tripwires; its exceptions become CheckFailures (the
    toolkit's :func:`course.checking.call_learner`), a call to the reference (PyTorch's, or
    the shipped checking code's) ForbiddenCall."""
    with watching(forbidden) as hits, watching_shipped_checks() as shipped:
        result = checking.call_learner(exercise, str(case), fn, *args, **kwargs)
    if shipped:
        raise ForbiddenCall(shipped_call_message(exercise, shipped), shipped)
    if hits:
        raise ForbiddenCall(forbidden_call_message(exercise, hits), hits)
    return result


class ForbiddenCall(CheckFailure):
    """Learner code called the reference it is graded against."""

    def __init__(self, message: str, hits: set[str]):
        super().__init__(message)
        self.hits = hits


#: The toolkit's, whose ``where`` may be a Case (shown as "case '...'").
expect_tensor, expect_tuple = checking.expect_tensor, checking.expect_tuple


# ---------------------------------------------------------------- comparing and diagnosing


def detach_outputs(outputs: Outputs) -> Outputs:
    """Plain CPU tensors, safe to save and compare in another process."""
    return {k: v.detach().as_subclass(torch.Tensor).to("cpu").clone() for k, v in outputs.items()}
