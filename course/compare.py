"""The one comparison engine of the course: tolerances, closeness, differences, diagnoses.

The instant checks after each exercise (``course.visible``) and the checks that grade the
notebooks use these same functions with the same tolerances, so an answer accepted at
grading is never rejected by the instant check for being a little off.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant: what the learner probably did, and a hint.

    ``run`` computes the variant's outputs (its arguments are the caller's business).
    """

    description: str
    hint: str
    run: Callable[..., object]


def tolerance(dtype: torch.dtype, device: torch.device | str = "cpu") -> tuple[float, float]:
    """(rtol, atol) for comparing with a reference on this device and dtype."""
    if dtype == torch.float64:
        return 1e-7, 1e-9
    if torch.device(device).type == "cuda":
        return 1e-4, 5e-5
    return 1e-4, 1e-5


def angle_tolerance(max_position: float) -> float:
    """Absolute tolerance for float32 sines and cosines of angles up to ``max_position``.

    A float32 angle ``pos * omega`` carries a rounding error of about ``pos * 2**-24``, a few
    times that when the frequencies are computed in float32 too.
    """
    return 5e-7 * max_position + 2e-6


#: Relative tolerance of a simulated variance against theory (10.2's sqrt(d_k) experiment).
VARIANCE_RTOL = 0.15


def close_score(got: float, expected: float) -> bool:
    """Does a sum of log-probabilities (a beam search's score) match: within 1e-4, or 1e-6 relative?"""
    return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-4)


def close(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float,
          equal_nan: bool = False) -> bool:
    """Same shape and every entry within atol + rtol·|expected|.

    NaN and inf never match, unless ``equal_nan`` lets non-finite entries match where
    both tensors have the same non-finite value (used to recognise a wrong variant).
    """
    if got.shape != expected.shape:
        return False
    got = got.detach().to(expected.device, expected.dtype)
    finite = torch.isfinite(got) & torch.isfinite(expected)
    error = (got - expected).abs()
    ok = (error <= atol + rtol * expected.abs()) & finite
    if equal_nan:
        same = (got.isnan() & expected.isnan()) | (~finite & (got == expected))
        ok = ok | same
    return bool(ok.all())


def describe_difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    """Where and how much two same-shaped tensors differ, without their values."""
    got = got.detach().to(expected.device, expected.dtype)
    if not torch.isfinite(got).all():
        count = int((~torch.isfinite(got)).sum())
        return f"{count} entries are inf or NaN"
    error = (got - expected).abs()
    index = tuple(int(i) for i in torch.nonzero(error == error.max())[0])
    return f"the largest difference is {error.max().item():.3g}, at index {index}"


def diagnose(key: str, got: torch.Tensor, mistakes: Mapping[str, Mistake],
             mistake_outputs: Mapping[str, Mapping[str, torch.Tensor]], rtol: float,
             atol: float) -> str | None:
    """The likely mistake: the first known variant whose ``key`` output the learner's matches."""
    for name, outputs in mistake_outputs.items():
        if key in outputs and close(got, outputs[key], rtol, max(atol, 1e-6), equal_nan=True):
            mistake = mistakes[name]
            return f"This looks like {mistake.description}. {mistake.hint}"
    return None


def explain_exception(exercise: str, error: Exception, where: str) -> str:
    """A learner-facing sentence for an exception raised by learner code in ``where``."""
    if isinstance(error, NotImplementedError):
        return f"{exercise} is not implemented yet (it raised NotImplementedError)."
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if "device" in text and ("expected device" in text or "same device" in text):
        return (
            f"{exercise} mixes devices in {where}: {text}. Create new tensors on the inputs' "
            "device (device=x.device, or torch.zeros_like(x)); never on a fixed device."
        )
    if "view size is not compatible" in text:
        return (f"{exercise} raised RuntimeError in {where}: {text[:80]}... After a transpose "
                "the tensor is not contiguous: use .reshape (or .contiguous().view).")
    return f"{exercise} raised {type(error).__name__} in {where}: {text}"
