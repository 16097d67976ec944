"""``dot_product_variance(d_k, num_samples, scaled) -> float``: the sqrt(d_k) experiment, judged
against theory (a variance of d_k, or 1 once scaled); the exercise and its visible check."""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_leaves

from course.checking import VARIANCE_RTOL, Case, CheckFailure, Exercise, passed, visible_check
from course.checking.forbidden import UncompiledDispatchMode

SCALED_HINT = ("With scaled=True every dot product is divided by sqrt(d_k) before the variance is taken: "
               "look at where (and whether) yours is.")
UNSCALED_HINT = ("Each sample should be one dot product q·k of two vectors of d_k independent standard "
                 "normal entries: look at how you draw q and k, and at what you take the variance of.")
ALL_PAIRS_HINT = ("Each sample is the dot product of its own pair (row i of q with row i of k): pairing "
                  "every query with every key builds num_samples² products to estimate the number "
                  "that num_samples of them give.")
PER_ENTRY_HINT = ("That is the variance of single products q_i·k_i, not of dot products: a dot product "
                  "adds up d_k such products, one per feature, before the variance is taken.")


def per_entry(value: float, d_k: int, scaled: bool) -> bool:
    """Is an unscaled ``value`` the variance of single products (1), not of dot products (d_k)?
    (Scaled, 1/d_k is also dots / d_k; the unscaled case comes first and tells them apart.)"""
    return not scaled and d_k > 1 and abs(value - 1.0) <= VARIANCE_RTOL


#: The largest tensor a simulation of n dot products of width d_k needs, in units of n·d_k: q
#: and k drawn together are 2; every query with every key is n / d_k (over 9 in every case).
LARGEST_TENSOR = 4


class LargestTensor(UncompiledDispatchMode):
    """Notes the number of elements of the largest tensor any PyTorch operator returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        sizes = [t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.largest = max([self.largest, *sizes])
        return out


def cases(sizes, samples: int, seed: int) -> list[Case]:
    """Every d_k of ``sizes``, unscaled and scaled, each a simulation of ``samples`` dot products."""
    return [Case(f"d_k={d_k}, scaled={scaled}", seed + d_k, {"d_k": d_k, "scaled": scaled,
                                                             "samples": samples},
                 kind="scaled" if scaled else "unscaled") for d_k in sizes for scaled in (False, True)]


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


class DotProductVariance(Exercise):
    """var(q.k) is d_k, or 1 once scaled: judged within a tolerance, not against a reference."""

    name = "dot_product_variance"
    reference_name = "theory (a variance of d_k, or 1 once scaled)"
    visible_cases = cases((8, 128), 5_000, 40)

    def run(self, impl, case, device):
        p = case.params
        with LargestTensor() as sizes:
            value = self.call(case, impl, p["d_k"], num_samples=p["samples"], scaled=p["scaled"])
        if sizes.largest > LARGEST_TENSOR * p["samples"] * p["d_k"]:
            raise CheckFailure(f"For {case} yours made a tensor of {sizes.largest:,} numbers, where "
                               f"num_samples × d_k is {p['samples'] * p['d_k']:,}. {ALL_PAIRS_HINT}")
        return {"variance": torch.tensor(as_number(value), dtype=torch.float64)}

    def reference(self, case, device):
        return {"variance": torch.tensor(1.0 if case.params["scaled"] else float(case.params["d_k"]))}

    def evaluate(self, case, got, device):
        have, d_k, scaled = float(got["variance"]), case.params["d_k"], case.params["scaled"]
        if not within_theory(have, d_k, scaled):
            hint = SCALED_HINT if scaled else UNSCALED_HINT
            hint = PER_ENTRY_HINT if per_entry(have, d_k, scaled) else hint
            raise CheckFailure(
                f"For d_k={d_k}{', scaled' if scaled else ''} the variance should be close to "
                f"{1 if scaled else d_k:g} (within {VARIANCE_RTOL:.0%}); yours is {have:.3g}. "
                f"{hint}")


@visible_check
def check_dot_product_variance(dot_product_variance) -> None:
    """About d_k without scaling, about 1 with it, within the grading tolerance."""
    DotProductVariance().run_cases(dot_product_variance)
    passed("The variance of q·k grows like d_k, and scaling brings it back to 1.")
