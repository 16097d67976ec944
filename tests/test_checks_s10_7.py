"""Properties of the 10.7 checks that are not "this answer passes / fails with this message" (those are
declared in tests/answers/s10_7): cases that exercise what they claim, references that agree with PyTorch
outside the checks, and tripwires."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course.checking import CheckFailure
from course.visible.s10_7 import gpt
from course.visible.s10_7 import lm_loss as loss_check
from grader.checks import s10_7
from samples import load_solution_namespace


@pytest.fixture(scope="module")
def solution_10_7():
    return load_solution_namespace("10.7-gpt")


def test_loss_reference_is_the_contracts_formula():
    """Does the per-position formula of the variants (with nothing wrong) equal F.cross_entropy?"""
    for seed, (_, B, n, V, pad_id, padded, e, _dtype, scale) in enumerate(loss_check.CASES):
        logits, targets = loss_check.make_inputs(B, n, V, pad_id, padded, torch.float64, seed, scale)
        assert torch.allclose(loss_check._smoothed(logits, targets, pad_id, e),
                              loss_check.reference(logits, targets, pad_id, e))
        assert (targets == pad_id).sum() == padded


def test_gpt_reference_is_the_notebook_model(solution_10_7):
    """Do PyTorch's layers holding the weights give the instructor GPT's logits, and does each known
    mistake change them?"""
    cfg = gpt.CONFIG
    model = solution_10_7["GPT"](*cfg.args(), pad_id=cfg.pad_id).double()
    values = gpt.seeded_values(cfg, 0, torch.float64)
    gpt.load(model, values)
    ids = gpt.make_ids(cfg, 2, 6, 2, 0)
    with torch.no_grad():
        want = gpt.reference_logits(values, ids, cfg)
        assert torch.allclose(model(ids), want)
        for mistake, changes in gpt.MISTAKES.items():
            assert not torch.allclose(gpt.reference_logits(values, ids, cfg, **changes), want), mistake.name


@pytest.mark.parametrize("call", [
    lambda logits, targets: nn.CrossEntropyLoss()(logits.flatten(0, 1), targets.flatten()),
    lambda logits, targets: F.nll_loss((logits - logits.logsumexp(-1, keepdim=True)).flatten(0, 1),
                                       targets.flatten()),
    lambda logits, targets: torch._C._nn.cross_entropy_loss(logits.flatten(0, 1), targets.flatten()),
], ids=["nn.CrossEntropyLoss", "F.nll_loss on log-sum-exp", "torch._C"])
def test_loss_tripwire(call):
    """Is every door to PyTorch's cross-entropy caught, however it is reached?"""
    with pytest.raises(CheckFailure, match="No credit for lm_loss"):
        s10_7.check_lm_loss(lambda logits, targets, pad_id, label_smoothing=0.0: call(logits, targets))


def test_rms_norm_tripwire():
    class Wrapped(nn.Module):
        def __init__(self, d_model, eps=1e-6):
            super().__init__()
            self.inner = nn.RMSNorm(d_model, eps=eps)

        def forward(self, x):
            return self.inner(x)

    class Shared(nn.RMSNorm):  # the same parameter name, PyTorch's forward
        def __init__(self, d_model, eps=1e-6):
            super().__init__(d_model, eps=eps)

    with pytest.raises(CheckFailure, match="wrong parameters|exactly one parameter"):
        s10_7.check_RMSNorm(Wrapped)
    with pytest.raises(CheckFailure, match="No credit for RMSNorm"):
        s10_7.check_RMSNorm(Shared)
