"""``causal_mask(n, device=None)``: the exercise (against PyTorch's own causal mask, inverted to our
polarity), its known mistakes and its visible check."""

from __future__ import annotations

import torch
from torch import nn

from course.checking import Case, CheckFailure, Exercise, Mistake, expect_tensor, passed, visible_check
from course.checking.forbidden import CAUSAL_MASK
from course.checking.standins import expect_bool_mask

NO_DIAGONAL = Mistake("no_diagonal", "a mask without its diagonal (tril(diagonal=-1))",
                      "A token may attend to itself: keep the diagonal (tril's default diagonal=0). "
                      "Without it the first token has nothing to attend to.")
INVERTED = Mistake("inverted", "the causal mask inverted (True above the diagonal)",
                   "True means *may attend*: query i may see keys 0..i, on and below the diagonal. "
                   "nn.Transformer's masks use the opposite polarity.")
UPPER = Mistake("upper", "an upper-triangular mask (triu): every token sees the future, not the past",
                "The lower triangle, not the upper: row i (a query) is True in columns 0..i (the keys it "
                "may see).")
#: Each mistake as a float mask of size n.
WRONG = {NO_DIAGONAL: lambda n: torch.ones(n, n).tril(-1), INVERTED: lambda n: torch.ones(n, n).triu(1),
         UPPER: lambda n: torch.ones(n, n).triu()}
CASES = [Case(f"n={n}", 700 + n, {"n": n}, kind="n = 1" if n == 1 else "n > 1")
         for n in (5, 2, 7, 1)]  # n=1 last: every mask of one True is ambiguous


def _as_float(mask: torch.Tensor) -> dict:
    """A mask as float64 0/1, so the usual comparison (and the records) apply."""
    return {"mask": mask.to(torch.float64)}


class CausalMask(Exercise):
    forbidden = CAUSAL_MASK
    name = "causal_mask"
    reference_name = "nn.Transformer.generate_square_subsequent_mask(n) == 0"
    mistakes = {m: (lambda case, device, wrong=wrong: _as_float(wrong(case.params["n"]).to(device)))
                for m, wrong in WRONG.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        n = case.params["n"]
        mask = expect_tensor(self.call(case, impl, n, device=device), "causal_mask's result", case)
        if mask.dtype != torch.bool:
            raise CheckFailure(f"causal_mask's result should be a bool tensor (True = may attend), not "
                               f"{mask.dtype}, in {case}: create the triangle of ones with dtype=torch.bool "
                               "(a float mask would be read as numbers to add to the scores).")
        return _as_float(expect_bool_mask(mask, "causal_mask's result", str(case)))

    def reference(self, case, device):
        theirs = nn.Transformer.generate_square_subsequent_mask(case.params["n"], device=device)
        return _as_float(theirs == 0)  # PyTorch's 0 (not -inf): may attend

    def extra_checks(self, impl, device):
        """The mask is made on the device it is given (checked on 'meta', on any machine)."""
        for where in (torch.device("meta"), "meta"):
            mask = expect_tensor(self.call(CASES[0], impl, 5, device=where), "causal_mask's result", CASES[0])
            if mask.device.type != "meta":
                raise CheckFailure(
                    f"causal_mask(5, device={where!r}) returned a tensor on {mask.device}: create "
                    "the mask on the device you are given (the device argument of the function that "
                    "makes the ones).")


@visible_check
def check_causal_mask(causal_mask) -> None:
    """A bool (n, n) mask, True on and below the diagonal, as PyTorch's (inverted) mask says, made on
    the device it is given."""
    CausalMask().run_cases(causal_mask)
    passed("causal_mask lets each position see itself and the positions before it.")
