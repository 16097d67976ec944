"""``softmax(x, dim=-1)``: the exercise (inputs, reference, known mistakes, visible cases) and its
visible check."""

from __future__ import annotations

from functools import partial

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.forbidden import SOFTMAX

DIM_HINT = ("The axis to normalise is the one dim names, not a fixed one: look at every reduction "
            "(the maximum and the sum) and the axis it runs over.")
LAST_AXIS = Mistake("last_axis", "a softmax over the last axis whatever dim says", DIM_HINT)
FIRST_AXIS = Mistake("first_axis", "a softmax over the first axis (dim=0)", DIM_HINT)
GLOBAL = Mistake("global", "one softmax over all the entries of x",
                 "Each slice along dim must sum to 1 on its own: a reduction without an axis runs "
                 "over the whole tensor. Look at the maximum and the sum.")
OTHER_DTYPE = Mistake("other_dtype", "a softmax computed in another dtype than that of x and returned in it "
                      "(float64 for float32 logits, say)",
                      "softmax returns the dtype of x: compute in it, or cast the result back with "
                      ".to(x.dtype).")

CASES = [  # params: the shape of the logits, dim, and the scale of large logits
    Case("1-D, 7 logits", 20, {"shape": (7,), "dim": -1}, kind="1-D"),
    Case("3-D (2, 3, 5), dim=-1", 21, {"shape": (2, 3, 5), "dim": -1}, torch.float32, kind="3-D, last dim"),
    Case("3-D (2, 3, 5), dim=1", 22, {"shape": (2, 3, 5), "dim": 1}, kind="3-D, middle dim"),
    Case("4-D (2, 3, 4, 5), dim=0", 23, {"shape": (2, 3, 4, 5), "dim": 0}, kind="4-D, first dim"),
    Case("float64, logits of magnitude 1e4", 24, {"shape": (2, 6), "dim": -1, "scale": 1e4},
         kind="logits of magnitude 1e4"),
    Case("float32, logits of magnitude 1e4", 25, {"shape": (3, 5), "dim": -1, "scale": 1e4}, torch.float32,
         kind="float32, logits of magnitude 1e4"),
]


def overflowed(where: str, output: torch.Tensor | None = None, dim: int = -1) -> CheckFailure:
    """The failure for inf or NaN on large logits (both sides word it so): whole slices of NaN
    beside finite ones are an underflow (0/0: one maximum subtracted for all the slices), the
    rest an overflow."""
    underflow = False
    if output is not None and output.dim() > 0:
        bad = ~torch.isfinite(output.detach())
        whole = bad.all(dim=dim)
        underflow = bool(whole.any()) and bool((bad.any(dim=dim) == whole).all()) and not bool(whole.all())
    if underflow:
        return CheckFailure(f"softmax gives NaN for whole slices in {where}: every exp of such a slice "
                            "underflowed to 0 and the division was 0/0. A slice whose logits all lie far "
                            "below the maximum you subtract meets this: subtract each slice's own maximum, "
                            "taken along dim.")
    return CheckFailure(f"softmax gives inf or NaN in {where}. exp overflows for large logits: subtract "
                        "the maximum along dim first (softmax(x) = softmax(x - max(x))).")


def softmax_of(function, case: Case, device) -> dict:
    """``function(x, dim)`` on a case's logits, with the gradient of x."""
    p = case.params
    x = randn(p["shape"], generator(case.seed), case.dtype, device, p.get("scale", 1.0)).requires_grad_()
    return with_gradients(lambda: (function(x, p["dim"]),), ("output",), {"x": x}, case.seed)


def _global(x, dim):
    return torch.softmax(x.flatten(), 0).view_as(x)


class Softmax(Exercise):
    forbidden = SOFTMAX
    name = "softmax"
    reference_name = "torch.softmax"
    mistakes = {LAST_AXIS: partial(softmax_of, lambda x, dim: torch.softmax(x, -1)),
                FIRST_AXIS: partial(softmax_of, lambda x, dim: torch.softmax(x, 0)),
                GLOBAL: partial(softmax_of, _global)}
    visible_cases = CASES

    def run(self, impl, case, device):
        def learner(x, dim):
            out = expect_tensor(self.call(case, impl, x, dim=dim), "softmax's result", case)
            if out.dtype != x.dtype:
                raise CheckFailure(f"softmax returns {out.dtype} for x of {x.dtype} in {case}.\n"
                                   f"{OTHER_DTYPE.sentence()}", OTHER_DTYPE)
            return out

        return softmax_of(learner, case, device)

    def reference(self, case, device):
        return softmax_of(torch.softmax, case, device)

    def evaluate(self, case, got, device):
        if "scale" in case.params and not all(torch.isfinite(t).all() for t in got.values()):
            raise overflowed(str(case), got["output"], case.params["dim"])
        super().evaluate(case, got, device)


@visible_check
def check_softmax(softmax) -> None:
    """Against torch.softmax along several dims, for 1-D to 4-D logits, some of magnitude 1e4."""
    Softmax().run_cases(softmax)
    passed("softmax matches torch.softmax along any dim, for any shape, even for huge logits.")
