"""Hidden check of ``sample``: on stand-in models, each step checked against the contract."""

from __future__ import annotations

import torch

from course.visible.s10_8.sample import StandIn, check_case, contract_next_token_probs
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case

SETTINGS = [  # name, B, n0, max_new_tokens, temperature, top_k, top_p, eos_id, seed
    ("temperature 0 (greedy), past max_len", 2, 3, 6, 0.0, None, None, None, 10),
    ("temperature 1, one prompt", 1, 2, 4, 1.0, None, None, None, 11),
    ("temperature 1.3, 4 prompts, eos_id=2, up to 12 new", 4, 1, 12, 1.3, None, None, 2, 12),
    ("top_k=2, eos_id=0", 3, 2, 8, 1.0, 2, None, 0, 13),
    ("top_p=0.8, temperature 0.7, eos_id=2", 3, 4, 7, 0.7, None, 0.8, 2, 14),
    ("no new token", 2, 2, 0, 1.0, None, None, 2, 15),
]


def _cases() -> list[Case]:
    out = [Case(s[0], s[-1], {"setting": s}) for s in SETTINGS]
    out.append(Case("float32 model, temperature 1, eos_id=2", 16,
                    {"setting": ("float32 model, eos_id=2", 3, 2, 9, 1.0, None, None, 2, 16)}, torch.float32))
    return out


@registered
class Sample(Exercise):
    name = "sample"
    reference_name = "the contract, step by step,"

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        setting = (case.name, *case.params["setting"][1:])
        return {"ids": check_case(impl, setting, case.dtype, device)}

    def reference(self, case, device):
        return {}  # check_case checks every step against the contract itself (known mistakes named)

    def evaluate(self, case, got, device):
        """Done in run: sampled ids are compared exactly, their length included."""

    def extra_checks(self, impl, device):
        model, prompt = StandIn(seed=12), torch.tensor([[3, 4], [0, 1]])
        g = torch.Generator().manual_seed(0)
        with contract_next_token_probs(impl):
            check_unplaced_tensors(self.name, lambda: impl(model, prompt, 8, generator=g, eos_id=2))
