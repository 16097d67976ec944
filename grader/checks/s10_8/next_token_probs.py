"""Hidden check of ``next_token_probs``: against the contract's rule (torch.softmax, pairwise ranks)."""

from __future__ import annotations

import torch

from course.visible.s10_8.next_token_probs import ROWS, VARIANTS, contract_probs, learner_probs
from grader.checks.core import Case, call_learner, generator, randn
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered

SETTINGS = [  # name, logits ("rows": the visible check's tied rows; else a shape of random logits), T, k, p
    ("tied rows, temperature 1", "rows", 1.0, None, None),
    ("tied rows, temperature 0", "rows", 0.0, None, None),
    ("tied rows, top_k=2", "rows", 1.0, 2, None),
    ("tied rows, top_k=5 (ties at the k-th)", "rows", 0.9, 5, None),
    ("tied rows, top_p=0.65 (ties across p)", "rows", 1.7, None, 0.65),
    ("tied rows, top_k=3 then top_p=0.75", "rows", 1.2, 3, 0.75),
    ("random 1-D logits, temperature 0.5", (9,), 0.5, None, None),
    ("random logits (2, 3, V), top_k=1", (2, 3, 7), 1.3, 1, None),
    ("random logits (4, V), top_k larger than V", (4, 6), 1.0, 10, None),
    ("random logits (4, V), top_p=0.3", (4, 10), 1.0, None, 0.3),
    ("random logits (2, 2, V), temperature 2, top_k=4, top_p=0.5", (2, 2, 12), 2.0, 4, 0.5),
    ("random logits (3, V), temperature 0", (3, 9), 0.0, 2, 0.9),
]


def _cases() -> list[Case]:
    out = []
    for i, (name, logits, T, k, p) in enumerate(SETTINGS):
        for dtype in (torch.float64, torch.float32):
            label = f"{name}, {'float32' if dtype == torch.float32 else 'float64'}"
            out.append(Case(label, 1000 + i, {"logits": logits, "options": (T, k, p)}, dtype))
    return out


def _logits(case: Case, device):
    spec = case.params["logits"]
    if spec == "rows":
        return torch.tensor(ROWS, dtype=torch.float64).to(device, case.dtype)
    return randn(spec, generator(case.seed), case.dtype, device, 1.5)


def _options(case: Case) -> dict:
    T, k, p = case.params["options"]
    return {"temperature": T, "top_k": k, "top_p": p}


@registered
class NextTokenProbs(Exercise):
    name = "next_token_probs"
    reference_name = "the contract's probabilities"
    mistakes = {m: (lambda case, device, c=c: {"output": contract_probs(_logits(case, device),
                                                                        **_options(case), **c)})
                for m, c in VARIANTS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        def watched(logits, **options):
            return call_learner(self.name, self.forbidden, case, impl, logits, **options)

        return {"output": learner_probs(watched, _logits(case, device), _options(case), str(case))}

    def reference(self, case, device):
        return {"output": contract_probs(_logits(case, device), **_options(case))}

    def extra_checks(self, impl, device):
        logits = _logits(self.cases()[10], torch.device("cpu"))
        check_unplaced_tensors(self.name, lambda: impl(logits, 2.0, 4, 0.5))
        check_unplaced_tensors(self.name, lambda: impl(logits, 0.0))
