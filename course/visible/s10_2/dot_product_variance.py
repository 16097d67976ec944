"""Visible check of ``dot_product_variance(d_k, num_samples, scaled) -> float``: the sqrt(d_k)
experiment, judged against theory (a variance of d_k, or 1 once scaled)."""

from __future__ import annotations

from course.checking import VARIANCE_RTOL, CheckFailure, call_learner, passed, visible_check

SCALED_HINT = "Divide each dot product by sqrt(d_k)."
UNSCALED_HINT = ("Draw q and k with independent standard normal entries (torch.randn) and take the "
                 "variance of their dot products.")


def as_number(value) -> float:
    """The learner's result as a float (a 0-d tensor is a number too)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CheckFailure("dot_product_variance should return a number (a float), not a "
                           f"{type(value).__name__}.") from None


def within_theory(value: float, d_k: int, scaled: bool) -> bool:
    """Is a simulated variance within the tolerance of theory: d_k, or 1 once scaled?"""
    want = 1.0 if scaled else float(d_k)
    return abs(value - want) <= VARIANCE_RTOL * want


@visible_check
def check_dot_product_variance(dot_product_variance) -> None:
    """About d_k without scaling, about 1 with it, within the grading tolerance."""
    for d_k in (8, 128):
        for scaled in (False, True):
            value = as_number(call_learner("dot_product_variance", f"d_k={d_k}, scaled={scaled}",
                                           dot_product_variance, d_k, num_samples=5_000, scaled=scaled))
            if not within_theory(value, d_k, scaled):
                raise CheckFailure(
                    f"For d_k={d_k}{', scaled' if scaled else ''} the variance should be close to "
                    f"{1 if scaled else d_k:g}; yours is {value:.3g}. "
                    f"{SCALED_HINT if scaled else UNSCALED_HINT}")
    passed("The variance of q·k grows like d_k, and scaling brings it back to 1.")
