"""Hidden check of ``GPT``: layout and tied weights, then logits and gradients against PyTorch's layers
(GELU ``nn.TransformerEncoderLayer(norm_first=True)`` blocks, ``F.layer_norm``, the tied ``F.linear``)."""

from __future__ import annotations

import torch

from course.visible.s10_7.gpt import (
    AGAINST,
    MISTAKES,
    Config,
    expect_embedding_dropout,
    expect_layout,
    learner_logits,
    make_ids,
    outputs,
    real,
    reference_logits,
    reference_outputs,
    seeded_values,
)
from grader.checks.exercise import Exercise, build_module, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner
from grader.checks.tripwire import ATTENTION, MULTIHEAD

CONFIGS = [  # name, config, B, n, padded positions at the end of row 0
    ("one block, no padding", Config(7, 4, 1, 8, 1, 5, 0), 2, 5, 0),
    ("two blocks, 2 heads, padding", Config(13, 8, 2, 16, 2, 9, 0), 3, 7, 3),
    ("three blocks, 4 heads, pad_id=5, n = max_len", Config(10, 8, 4, 12, 3, 6, 5), 2, 6, 2),
    ("one token", Config(6, 4, 2, 8, 2, 4, 1), 2, 1, 0),
]


def _cases() -> list[Case]:
    out = [Case(name, 900 + i, {"config": cfg, "B": B, "n": n, "padded": padded})
           for i, (name, cfg, B, n, padded) in enumerate(CONFIGS)]
    out.append(Case("float32, two blocks, padding", 920, {"config": Config(11, 8, 2, 16, 2, 8, 3), "B": 2,
                                                           "n": 8, "padded": 2}, torch.float32))
    return out


def _inputs(case: Case, device):
    p = case.params
    values = seeded_values(p["config"], case.seed, case.dtype, device)
    return values, make_ids(p["config"], p["B"], p["n"], p["padded"], case.seed, device)


def _variant(changes):
    def run(case, device):
        values, ids = _inputs(case, device)
        cfg = case.params["config"]
        with torch.no_grad():
            return {"output": real(reference_logits(values, ids, cfg, **changes), ids, cfg)}
    return run


@registered
class GPTModule(Exercise):
    name = "GPT"
    reference_name = AGAINST
    forbidden = ATTENTION | MULTIHEAD
    mistakes = {m: _variant(changes) for m, changes in MISTAKES.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        cfg = case.params["config"]
        model = build_module(self.name, self.forbidden, case, impl, *cfg.args(), pad_id=cfg.pad_id)
        expect_layout(model, cfg)
        model = model.to(device)
        values, ids = _inputs(case, device)
        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, value in values.items():
                params[name].copy_(value)

        def watched(what, where, fn, *args):
            return call_learner(self.name, self.forbidden, case, fn, *args)

        return outputs(lambda: learner_logits(model, ids, cfg, str(case), watched),
                       {name: params[name] for name in values}, ids, cfg, case.seed)

    def reference(self, case, device):
        values, ids = _inputs(case, device)
        return reference_outputs(values, ids, case.params["config"], case.seed)

    def extra_checks(self, impl, device):
        cfg = Config(9, 4, 2, 8, 2, 6, 0)

        model, ids = impl(*cfg.args(), pad_id=cfg.pad_id), make_ids(cfg, 2, 5, 1, 0)
        check_unplaced_tensors(self.name, lambda: model(ids))  # only forward's new tensors go to 'meta'
        expect_embedding_dropout(impl, Config(7, 6, 3, 12, 3, 5, 2))
