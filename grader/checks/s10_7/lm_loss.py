"""Hidden check of ``lm_loss``: against ``F.cross_entropy(ignore_index=pad_id, label_smoothing=...)``."""

from __future__ import annotations

import torch

from course.visible.s10_7.lm_loss import (
    VARIANTS,
    expect_finite,
    expect_nan_when_all_padded,
    make_inputs,
    outputs,
    reference,
)
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner, expect_tensor
from grader.checks.tripwire import LOSSES, SOFTMAX

SHAPES = [  # name, B, n, V, pad_id, padded positions of row 0, label_smoothing, logit scale
    ("no padding, no smoothing", 2, 4, 5, 0, 0, 0.0, 1.0),
    ("padding at the end of row 0", 3, 5, 7, 0, 2, 0.0, 1.0),
    ("label_smoothing=0.1, pad_id=4", 2, 6, 9, 4, 3, 0.1, 1.0),
    ("label_smoothing=0.3, pad_id the last id", 4, 3, 6, 5, 1, 0.3, 2.0),
    ("one sentence, V=2", 1, 5, 2, 1, 2, 0.2, 1.0),
]


def _cases() -> list[Case]:
    out = [Case(name, 700 + i, {"shape": (B, n, V, pad_id, padded), "e": e, "scale": scale})
           for i, (name, B, n, V, pad_id, padded, e, scale) in enumerate(SHAPES)]
    out += [Case("float32, label_smoothing=0.1", 720, {"shape": (3, 4, 8, 0, 2), "e": 0.1, "scale": 1.0},
                 torch.float32),
            Case("float32, logits of about 80", 721, {"shape": (2, 3, 6, 2, 1), "e": 0.1, "scale": 80.0},
                 torch.float32),
            Case("float32, logits of about 80, no smoothing", 722, {"shape": (2, 4, 5, 0, 1), "e": 0.0,
                                                                    "scale": 80.0}, torch.float32)]
    return out


def _inputs(case: Case, device):
    return make_inputs(*case.params["shape"], case.dtype, case.seed, case.params["scale"], device)


def _pad(case: Case) -> int:
    return case.params["shape"][3]


@registered
class LmLoss(Exercise):
    name = "lm_loss"
    reference_name = "F.cross_entropy(ignore_index, label_smoothing)"
    forbidden = LOSSES | SOFTMAX
    mistakes = {m: (lambda case, device, f=f: outputs(f, *_inputs(case, device), _pad(case), case.params["e"],
                                                      case.seed)) for m, f in VARIANTS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        def loss(*args):
            return expect_tensor(call_learner(self.name, self.forbidden, case, impl, *args), self.name, case)

        got = outputs(loss, *_inputs(case, device), _pad(case), case.params["e"], case.seed)
        expect_finite(got, self.expected(case, device), str(case))
        return got

    def reference(self, case, device):
        return outputs(reference, *_inputs(case, device), _pad(case), case.params["e"], case.seed)

    def extra_checks(self, impl, device):
        for dtype in (torch.float32, torch.float64):
            expect_nan_when_all_padded(impl, dtype, device)
        logits, targets = _inputs(self.cases()[2], torch.device("cpu"))
        check_unplaced_tensors(self.name, lambda: impl(logits, targets, 4, 0.1))
