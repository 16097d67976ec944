"""Tolerances and closeness: the one comparison engine of the course.

An answer accepted at grading is never rejected by the visible check for being a little
off: both sides compare with these functions and tolerances.
"""

from __future__ import annotations

import math

import torch


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


#: A float64 result off by at most this share of its largest entry was computed in float32 in part
#: (float32 rounding is about 1e-7 of it, 1e-6 after a block's sums; every known mistake much more).
FLOAT32_LEVEL = 1e-5


def _within(got: torch.Tensor, want: torch.Tensor, level: float) -> bool:
    return bool((got.double() - want).abs().max() <= level * want.abs().max())


def float32_inside(got: dict, want: dict, level: float = FLOAT32_LEVEL) -> bool:
    """Do float64 outputs ``got`` differ from ``want`` by float32 rounding only (computed in float32)?"""
    if not want or any(w.dtype != torch.float64 for w in want.values()) or set(got) != set(want):
        return False
    rtol, atol = tolerance(torch.float64)
    if all(close(got[k], w, rtol, atol) for k, w in want.items()):
        return False
    return all(got[k].shape == w.shape and got[k].dtype == torch.float64 and _within(got[k], w, level)
               for k, w in want.items())
