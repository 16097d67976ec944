"""Calling learner code the way grading does: on the grading device.

:func:`grading_device` and :func:`exact_matmul` say where and how the cases run;
:func:`detach_outputs` makes the plain tensors a record saves. Learner code runs under the
tripwires of :mod:`course.checking.forbidden` on both sides; the case-running engine is
:mod:`grader.checks.exercise`.
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
from course.checking.forbidden import ForbiddenCall, call_guarded  # noqa: F401 - the checks' names for them

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


#: The toolkit's, whose ``where`` may be a Case (shown as "case '...'").
expect_tensor, expect_tuple = checking.expect_tensor, checking.expect_tuple


# ---------------------------------------------------------------- comparing and diagnosing


def detach_outputs(outputs: Outputs) -> Outputs:
    """Plain CPU tensors, safe to save and compare in another process."""
    return {k: v.detach().as_subclass(torch.Tensor).to("cpu").clone() for k, v in outputs.items()}
