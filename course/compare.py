"""Legacy names of the comparison engine, for the sections not yet moved to :mod:`course.checking`.

Tolerances and closeness live in :mod:`course.checking.compare`; this module keeps the old
``Mistake(description, hint, run)`` and ``diagnose`` until every section uses
:class:`course.checking.Mistake`. It goes away with the last of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from course.checking.compare import (  # noqa: F401 - re-exported for the legacy sections
    VARIANCE_RTOL,
    angle_tolerance,
    close,
    close_score,
    describe_difference,
    tolerance,
)
from course.checking.failure import explain_exception  # noqa: F401


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant (legacy form): what the learner probably did, a hint, and its run."""

    description: str
    hint: str
    run: Callable[..., object]


def diagnose(key: str, got: torch.Tensor, mistakes: Mapping[str, Mistake],
             mistake_outputs: Mapping[str, Mapping[str, torch.Tensor]], rtol: float,
             atol: float) -> str | None:
    """The likely mistake: the first known variant whose ``key`` output the learner's matches."""
    for name, outputs in mistake_outputs.items():
        if key in outputs and close(got, outputs[key], rtol, max(atol, 1e-6), equal_nan=True):
            mistake = mistakes[name]
            return f"This looks like {mistake.description}. {mistake.hint}"
    return None
