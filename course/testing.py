"""Instant checks that run right after each exercise (the visible tests).

They compare with PyTorch on one small example and say what went wrong (which
case, which shape, how far off) without ever printing the expected numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class VisibleCheckFailure(AssertionError):
    """A visible test failed; the message says what to look at."""


def check_tensor(got, what: str) -> torch.Tensor:
    """Fail with a clear message unless ``got`` is a tensor."""
    if not isinstance(got, torch.Tensor):
        raise VisibleCheckFailure(f"{what} should be a torch.Tensor, but got {type(got).__name__}.")
    return got


def check_pair(got, what: str, names: Sequence[str] = ("output", "weights")):
    """Fail unless ``got`` is a pair of tensors such as (output, weights)."""
    if not (isinstance(got, tuple) and len(got) == len(names)):
        kind = f"a {type(got).__name__}" + (f" of length {len(got)}" if isinstance(got, tuple) else "")
        raise VisibleCheckFailure(f"{what} should return a tuple ({', '.join(names)}), but returned {kind}.")
    return tuple(check_tensor(t, f"{what}'s {n}") for t, n in zip(got, names))


def check_shape(got, expected: Sequence[int], what: str, case: str = "") -> None:
    """Fail unless ``got`` has the expected shape."""
    check_tensor(got, what)
    if tuple(got.shape) != tuple(expected):
        where = f" ({case})" if case else ""
        raise VisibleCheckFailure(
            f"{what}{where} should have shape {tuple(expected)}, but has shape {tuple(got.shape)}."
        )


def check_close(got, expected: torch.Tensor, what: str, case: str = "",
                rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Fail unless ``got`` matches ``expected``; the message gives the error, not the answer."""
    check_shape(got, expected.shape, what, case)
    got = got.detach().to(expected.device, expected.dtype)
    where = f" ({case})" if case else ""
    if not torch.isfinite(got).all():
        raise VisibleCheckFailure(f"{what}{where} contains inf or NaN values.")
    error = (got - expected).abs()
    limit = atol + rtol * expected.abs()
    if (error > limit).any():
        index = tuple(int(i) for i in torch.nonzero(error > limit)[0])
        raise VisibleCheckFailure(
            f"{what}{where} differs from PyTorch's result: the largest difference is "
            f"{error.max().item():.3g} (allowed {atol:g} + {rtol:g}·|expected|); the first "
            f"wrong entry is at index {index}."
        )


def passed(message: str) -> None:
    """Say that a visible test passed."""
    print(f"✓ {message}")
