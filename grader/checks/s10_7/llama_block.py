"""Hidden check of ``LlamaBlock``: against RMSNorm, rotary q and k, ``F.scaled_dot_product_attention``
and SwiGLU assembled from PyTorch's primitives with the same (seeded) weights."""

from __future__ import annotations

import torch

from course.visible.s10_7.llama_block import (
    AGAINST,
    SWITCHES,
    Config,
    build,
    case_inputs,
    learner_outputs,
    reference_outputs,
)
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner
from grader.checks.tripwire import ATTENTION, MULTIHEAD

CONFIGS = [  # name, config, B, n, mask
    ("one head, causal", Config(6, 1, 8), 2, 4, "causal"),
    ("2 heads, no mask, eps=0.5", Config(8, 2, 5, 0.5), 3, 5, None),
    ("4 heads of 4, causal and padding, base=50", Config(16, 4, 20, None, 50.0), 2, 7, "padded"),
    ("one token", Config(4, 2, 6), 2, 1, "causal"),
]


def _cases() -> list[Case]:
    out = [Case(name, 960 + i, {"config": cfg, "B": B, "n": n, "mask": mask})
           for i, (name, cfg, B, n, mask) in enumerate(CONFIGS)]
    out.append(Case("float32, 2 heads of 6, causal", 970, {"config": Config(12, 2, 16), "B": 2, "n": 6,
                                                           "mask": "causal"}, torch.float32))
    return out


def _inputs(case: Case, device):
    p = case.params
    return case_inputs(p["config"], p["B"], p["n"], p["mask"], case.dtype, case.seed, device)


@registered
class LlamaBlockModule(Exercise):
    name = "LlamaBlock"
    reference_name = AGAINST
    forbidden = ATTENTION | MULTIHEAD
    mistakes = {m: (lambda case, device, s=s: reference_outputs(case.params["config"], *_inputs(case, device),
                                                                case.seed, **s)) for m, s in SWITCHES.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        def watched(what, where, fn, *args, **kwargs):
            return call_learner(self.name, self.forbidden, case, fn, *args, **kwargs)

        block = build(impl, case.params["config"], watched).to(device, case.dtype)
        return learner_outputs(block, *_inputs(case, device), str(case), case.seed, watched)

    def reference(self, case, device):
        return reference_outputs(case.params["config"], *_inputs(case, device), case.seed)

    def extra_checks(self, impl, device):
        block, x = impl(8, 2, 6), torch.ones(2, 3, 8)  # made outside: only forward's new tensors go to 'meta'
        mask = torch.ones(3, 3, dtype=torch.bool).tril()
        check_unplaced_tensors(self.name, lambda: block(x, mask))
