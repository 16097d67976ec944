"""Known mistakes: declared once per exercise, recognised by running them, named in one wording.

A :class:`Mistake` says what a learner probably did and how to fix it; it is declared once, in
the exercise's visible-check module, and the hidden check and the planted bugs of the tests
refer to the same object. How to reproduce a mistake depends on the case at hand, so a check
pairs each mistake with a function that computes its outputs there (:data:`Variants`), and
:func:`diagnose` names the first mistake whose outputs the learner's match.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from course.checking.compare import close


@dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``name`` (stable, for counting), what it is, and a hint."""

    name: str
    description: str
    hint: str

    def sentence(self) -> str:
        """How every check words it."""
        return f"This looks like {self.description}. {self.hint}"


#: Mistakes of one case, each with a function that returns its outputs (a tensor or named tensors).
Variants = Mapping[Mistake, Callable[[], object]]


def diagnose(got, key: str | None, variants: Variants, rtol: float, atol: float,
             reference=None) -> Mistake | None:
    """The first mistake whose outputs ``got`` matches, or None.

    ``got`` is a tensor (``key`` None) or named outputs; then the variant must match output
    ``key`` and every other output it has, gradients aside: ``K = X @ W_q`` matches "W_q and
    W_k swapped" only if ``Q = X @ W_k`` too. A variant that cannot run on the case says nothing,
    and so does one whose outputs are the ``reference``'s on this case (the mask inverted on a
    case without a mask): code that differs from the reference is never that mistake there,
    nor is code nearer the reference than the variant (rounding, not the mistake).
    """
    atol = max(atol, 1e-6)
    for mistake, run in variants.items():
        try:
            variant = run()
        except Exception:  # noqa: BLE001 - a variant that cannot run on this case says nothing
            continue
        if reference is not None and _same(variant, reference, rtol, atol):
            continue
        if _matches(got, variant, key, rtol, atol) and _nearer(got, variant, reference, key):
            return mistake
    return None


def _nearer(got, variant, reference, key: str | None) -> bool:
    """Is ``got`` nearer the variant than the reference (output ``key``)? Rounding that fails the
    reference's tolerance is not a mistake that differs from it by less than that rounding."""
    if reference is None:
        return True
    pick = (lambda outputs: outputs) if key is None else (lambda outputs: outputs[key])
    try:
        mine, theirs, right = (pick(o).detach().double().cpu() for o in (got, variant, reference))
        return bool(_distance(mine, theirs) < _distance(mine, right))
    except (KeyError, RuntimeError, TypeError, AttributeError):
        return True


def _distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The largest |a - b|: equal entries (infinities, NaN with NaN) 0 apart, NaN with a number infinitely."""
    gap = torch.where((a == b) | (a.isnan() & b.isnan()), torch.zeros_like(a), (a - b).abs())
    return gap.nan_to_num(nan=math.inf).max() if gap.numel() else torch.zeros(())


def _same(variant, reference, rtol: float, atol: float) -> bool:
    """Does a variant give the reference's outputs (every output both have, gradients included)?"""
    if isinstance(reference, torch.Tensor):
        return isinstance(variant, torch.Tensor) and close(variant, reference, rtol, atol, equal_nan=True)
    if not isinstance(variant, Mapping):
        return False
    shared = [k for k in reference if k in variant]
    return bool(shared) and all(isinstance(variant[k], torch.Tensor) and
                                close(variant[k], reference[k], rtol, atol, equal_nan=True) for k in shared)


def _matches(got, variant, key: str | None, rtol: float, atol: float) -> bool:
    if key is None:
        return isinstance(variant, torch.Tensor) and isinstance(got, torch.Tensor) and \
            close(got, variant, rtol, atol, equal_nan=True)
    if not isinstance(variant, Mapping) or key not in variant:
        return False
    keys = [key] + [k for k in variant if k != key and not k.startswith("grad ") and k in got]
    return all(isinstance(variant[k], torch.Tensor) and close(got[k], variant[k], rtol, atol, equal_nan=True)
               for k in keys)
