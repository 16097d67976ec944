"""Comparing within a tolerance that grows with the position: both sides of 10.4 use it.

A float32 angle ``pos * omega`` carries a rounding error that grows with ``pos``
(:func:`course.checking.angle_tolerance`), so the absolute tolerance is the caller's, not the
dtype's; otherwise this is :func:`course.checking.compare_outputs`, with a hint about a broken
property when no known mistake matches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from course.checking import CheckFailure, Variants, close, describe_difference, diagnose, expect_shape


def compare_within(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], what: str, where: str,
                   atol: float, *, against: str | Mapping[str, str], variants: Variants | None = None,
                   hint: Callable[[str, torch.Tensor], str | None] | None = None, rtol: float = 1e-6) -> None:
    """Fail on the first output of ``got`` farther than ``atol + rtol·|want|`` from ``want``.

    ``against`` says what an output is compared with (one text, or one per output); the failure
    names the first of ``variants`` that matches, else adds ``hint(key, got[key])`` if any.
    """
    label = {key: what if key == "output" else f"{what}: {key}" for key in want}
    for key, expected in want.items():
        if key not in got:
            raise CheckFailure(f"{what}: no {key} was produced in {where}.")
        expect_shape(got[key], expected.shape, label[key], where)
    for key, expected in want.items():
        if close(got[key], expected, rtol, atol):
            continue
        mistake = diagnose(got, key, variants or {}, rtol, atol, reference=want)
        reference = against if isinstance(against, str) else against.get(key, "the reference")
        message = (f"{label[key]} differs from {reference} in {where}: "
                   f"{describe_difference(got[key], expected)} (allowed {atol:.1g}).")
        extra = mistake.sentence() if mistake else (hint(key, got[key]) if hint else None)
        raise CheckFailure(message + (f"\n{extra}" if extra else ""), mistake)
