"""Visible check of ``softmax(x, dim=-1)``, and its known mistakes."""

from __future__ import annotations

from functools import partial

import torch

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_tensor,
    passed,
    seeded,
    visible_check,
    with_gradients,
)

DIM_HINT = "Use the dim argument in max, sum and keepdim=True."
LAST_AXIS = Mistake("last_axis", "a softmax over the last axis whatever dim says", DIM_HINT)
FIRST_AXIS = Mistake("first_axis", "a softmax over the first axis (dim=0)", DIM_HINT)
GLOBAL = Mistake("global", "one softmax over all the entries of x",
                 "Normalise along dim only: max and sum with dim=dim, keepdim=True.")

CASES = [  # name, shape, dim, dtype, scale of the logits
    ("1-D, 7 logits", (7,), -1, torch.float64, 1.0),
    ("3-D (2, 3, 5), dim=-1", (2, 3, 5), -1, torch.float32, 1.0),
    ("3-D (2, 3, 5), dim=1", (2, 3, 5), 1, torch.float64, 1.0),
    ("4-D (2, 3, 4, 5), dim=0", (2, 3, 4, 5), 0, torch.float64, 1.0),
    ("float64, logits of magnitude 1e4", (2, 6), -1, torch.float64, 1e4),
    ("float32, logits of magnitude 1e4", (3, 5), -1, torch.float32, 1e4),
]


def overflowed(where: str) -> CheckFailure:
    """The failure for inf or NaN on large logits (both sides word it so)."""
    return CheckFailure(f"softmax gives inf or NaN in {where}. exp overflows for large logits: subtract "
                        "the maximum along dim first (softmax(x) = softmax(x - max(x))).")


def _outputs(function, shape, dim, dtype, scale, seed):
    x = seeded(*shape, seed=seed, dtype=dtype, scale=scale).requires_grad_()
    return with_gradients(lambda: (function(x, dim),), ("output",), {"x": x}, seed)


def _over(axis):
    return lambda x, dim: torch.softmax(x, axis)


def _global(x, dim):
    return torch.softmax(x.flatten(), 0).view_as(x)


@visible_check
def check_softmax(softmax) -> None:
    """Against torch.softmax along several dims, for 1-D to 4-D logits, some of magnitude 1e4."""
    for seed, (case, *spec) in enumerate(CASES):
        where = f"case '{case}'"

        def learner(x, dim, where=where):
            return expect_tensor(call_learner("softmax", where, softmax, x, dim=dim), "softmax's result")

        got = _outputs(learner, *spec, seed)
        if spec[3] > 1 and not torch.isfinite(got["output"]).all():
            raise overflowed(where)
        variants = {LAST_AXIS: partial(_outputs, _over(-1), *spec, seed),
                    FIRST_AXIS: partial(_outputs, _over(0), *spec, seed),
                    GLOBAL: partial(_outputs, _global, *spec, seed)}
        compare_outputs(got, _outputs(torch.softmax, *spec, seed), "softmax", where, against="torch.softmax",
                        variants=variants)
    x = torch.ones(2, 3)  # made outside the probe: only softmax's own new tensors go to 'meta'
    check_unplaced_tensors("softmax", lambda: softmax(x, dim=-1))
    passed("softmax matches torch.softmax along any dim, for any shape, even for huge logits.")
