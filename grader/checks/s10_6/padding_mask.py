"""Hidden check of ``padding_mask``: against ``(tokens != pad_id)`` viewed as ``(B, 1, 1, n)``."""

from __future__ import annotations

import torch

from course.checking.standins import expect_bool_mask
from course.visible.s10_6.padding_mask import WRONG, expect_key_shape
from grader.checks.exercise import Exercise, check_device_independence, registered
from grader.checks.guarded_calls import Case, Outputs, call_learner

CASES = [  # explicit rows, pad_id
    Case("B=2, n=5, padding at the end", 710, {"rows": [[5, 9, 4, 7, 0], [6, 8, 0, 0, 0]], "pad": 0}),
    Case("B=3, n=4, no padding", 711, {"rows": [[4, 5, 6, 7], [7, 6, 5, 4], [1, 2, 3, 9]], "pad": 0}),
    Case("pad_id=5 (and 0 is a real word)", 712,
         {"rows": [[0, 3, 8, 5, 5, 5], [7, 0, 1, 2, 9, 5], [4, 4, 0, 5, 5, 5]], "pad": 5}),
    Case("padding at the start", 713, {"rows": [[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]], "pad": 0}),
]


def _tokens(case: Case, device) -> torch.Tensor:
    return torch.tensor(case.params["rows"], dtype=torch.long, device=device)  # (B, n)


def _with(fn, case: Case, device) -> Outputs:
    """A mask as float64 0/1, so the usual comparison and records apply."""
    return {"mask": fn(_tokens(case, device), case.params["pad"]).to(torch.float64)}


@registered
class PaddingMask(Exercise):
    name = "padding_mask"
    reference_name = "tokens != pad_id, shaped (B, 1, 1, n)"
    mistakes = {m: (lambda c, d, wrong=wrong: _with(lambda t, p: wrong(t, p)[:, None, None, :], c, d))
                for m, wrong in WRONG.items()}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        def learner(tokens, pad_id):
            mask = expect_bool_mask(call_learner(self.name, self.forbidden, case, impl, tokens, pad_id),
                                    "padding_mask's result", str(case))
            expect_key_shape(mask, *tokens.shape, "padding_mask's result", str(case))
            return mask
        return _with(learner, case, device)

    def reference(self, case, device):
        return _with(lambda t, p: (t != p)[:, None, None, :], case, device)

    def extra_checks(self, impl, device):
        check_device_independence(
            self.name, lambda dev: impl(torch.zeros(2, 5, dtype=torch.long, device=dev), 0))
