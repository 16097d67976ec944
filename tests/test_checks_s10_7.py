"""Properties of the 10.7 checks that are not "this answer passes / fails with this message" (those are
declared in tests/answers/s10_7): cases that exercise what they claim, references that agree with PyTorch
outside the checks and tripwires. That nothing shipped earns credit is tested for every exercise by
tests/test_shipped_callables.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course.checking import CheckFailure
from course.checking.modules import load_parameters
from course.visible import s10_7 as visible_10_7
from course.visible.s10_7 import gpt, llama_block, swiglu
from course.visible.s10_7 import lm_loss as loss_check
from course.visible.s10_7.rms_norm import EPS_OUTSIDE, FLOAT32_INSIDE, RMSNormModule
from grader.checks import s10_7
from samples import load_solution_namespace
from tests.answers.s10_7.rms_norm import EpsOutside, Float32Inside


@pytest.fixture(scope="module")
def solution_10_7():
    return load_solution_namespace("10.7-gpt")


def test_loss_reference_is_the_contracts_formula():
    """Does the per-position formula of the variants (with nothing wrong) equal F.cross_entropy?"""
    cpu = torch.device("cpu")
    for case in s10_7.EXERCISES["lm_loss"].cases() + loss_check.CASES:
        case = replace(case, dtype=torch.float64)
        (pad_id, e), padded = loss_check.options(case), case.params["shape"][4]
        logits, targets = loss_check.inputs(case, cpu)
        formula = loss_check._smoothed(logits, targets, pad_id, e, spread="all", kept="real")
        assert torch.allclose(formula, loss_check.LmLoss().reference(case, cpu)["output"])
        assert (targets == pad_id).sum() == padded


def test_gpt_reference_is_the_notebook_model(solution_10_7):
    """Do PyTorch's layers holding the weights give the instructor GPT's logits, and does each known
    mistake change them?"""
    cfg = gpt.CONFIG
    model = solution_10_7["GPT"](*cfg.args(), pad_id=cfg.pad_id).double()
    values = gpt.seeded_values(cfg, 0, torch.float64)
    load_parameters(model, values, "GPT", gpt.HOW)
    ids = gpt.make_ids(cfg, 2, 6, 2, 0)
    with torch.no_grad():
        want = gpt.real(gpt.reference_logits(values, ids, cfg), ids, cfg)  # the real tokens' logits
        assert torch.allclose(gpt.real(model(ids), ids, cfg), want)
        for mistake, changes in gpt.MISTAKES.items():
            changed = gpt.real(gpt.reference_logits(values, ids, cfg, **changes), ids, cfg)
            assert not torch.allclose(changed, want), mistake.name


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


def test_every_swiglu_and_llama_mistake_shows_in_a_visible_case():
    """Does each known SwiGLU mistake change the outputs of every visible case, and each LlamaBlock mistake
    those of at least one (so that it can be named there)?"""
    cpu = torch.device("cpu")
    for exercise, where in ((swiglu.SwiGLUModule(), all), (llama_block.LlamaBlockModule(), any)):
        for mistake, run in exercise.mistakes.items():
            assert where(not torch.allclose(run(case, cpu)["output"], exercise.reference(case, cpu)["output"])
                         for case in exercise.visible_cases), mistake.name


def test_llama_reference_turns_as_apply_rotary(solution_10_7):
    """Is the LlamaBlock reference's rotary formula 10.4's apply_rotary (the notebook's given one)?"""
    t = torch.randn(2, 3, 5, 6, dtype=torch.float64)
    for base in (10000.0, 50.0):
        assert torch.allclose(llama_block._turned(t, base), solution_10_7["apply_rotary"](t, base=base))


def test_rounding_is_not_named_a_mistake():
    """Is RMSNorm computed in float32 inside (rounding of about 1e-7) never told "eps outside the sqrt"
    (which differs from the reference by about 5e-7 with the default eps), on either side, in any case,
    and eps outside the sqrt never told "float32 inside"?"""
    cpu = torch.device("cpu")
    for exercise in (RMSNormModule(), s10_7.EXERCISES["RMSNorm"]):
        for case in exercise.cases():
            for bug, other in ((Float32Inside, EPS_OUTSIDE), (EpsOutside, FLOAT32_INSIDE)):
                try:
                    exercise.evaluate(case, exercise.run(bug, case, cpu), cpu)
                except CheckFailure as failure:
                    assert failure.mistake is not other, (case.name, bug.__name__)


def test_visible_checks_run_on_a_torch_without_rms_norm(solution_10_7, monkeypatch):
    """Do the RMSNorm and LlamaBlock checks pass the solution on a torch before 2.4 (no nn.RMSNorm,
    no F.rms_norm), as the notebooks promise torch 2.1 on?"""
    monkeypatch.delattr(F, "rms_norm")
    monkeypatch.delattr(nn, "RMSNorm")
    visible_10_7.check_RMSNorm(solution_10_7["RMSNorm"])
    visible_10_7.check_LlamaBlock(solution_10_7["LlamaBlock"])


def test_the_stand_ins_of_llama_block_earn_no_credit():
    """Is an RMSNorm or SwiGLU built on the stand-ins LlamaBlock's check puts in place of the learner's parts
    refused, on both sides (they hold the reference)?"""

    class OnStandInNorm(llama_block.StandInRMSNorm):
        def __init__(self, d_model, eps=1e-6):
            super().__init__(torch.ones(d_model), eps)

    class OnStandInSwiGLU(llama_block.StandInSwiGLU):
        def __init__(self, d_model, d_ff):
            super().__init__(swiglu_layers(d_model, d_ff))

    for check in (visible_10_7.check_RMSNorm, s10_7.check_RMSNorm):
        with pytest.raises(CheckFailure, match="No credit for RMSNorm.*StandInRMSNorm"):
            check(OnStandInNorm)
    for check in (visible_10_7.check_SwiGLU, s10_7.check_SwiGLU):
        with pytest.raises(CheckFailure, match="No credit for SwiGLU.*StandInSwiGLU"):
            check(OnStandInSwiGLU)


def swiglu_layers(d_model, d_ff) -> nn.Module:
    layers = nn.Module()
    layers.w1, layers.w2, layers.w3 = (nn.Linear(a, b, bias=False) for a, b in
                                       ((d_model, d_ff), (d_ff, d_model), (d_model, d_ff)))
    return layers


def test_llama_block_runs_the_reference_parts(solution_10_7):
    """Does LlamaBlock's check put nn.RMSNorm's function (with the eps each norm was given) and the SwiGLU
    reference in place of the learner's parts, and leave PyTorch's nn.RMSNorm alone?"""
    block = llama_block.with_reference_parts(solution_10_7["LlamaBlock"](8, 2, 6, eps=0.25))
    assert isinstance(block.norm1, llama_block.StandInRMSNorm) and block.norm1.eps == 0.25
    assert isinstance(block.ffn, llama_block.StandInSwiGLU)
    assert set(dict(block.named_parameters())) == set(llama_block.Config(8, 2, 6).shapes())
    if hasattr(nn, "RMSNorm"):
        block.norm2 = nn.RMSNorm(8, eps=0.5)
        assert isinstance(llama_block.with_reference_parts(block).norm2, nn.RMSNorm)


def answer_lines(assignment: str) -> set[str]:
    """The computing lines of a solution notebook's answers: between ### BEGIN SOLUTION and ### END
    SOLUTION, comments stripped, whitespace normalised, 12 characters or more."""
    import json
    import re

    from tests.answers import ROOT

    (path,) = (ROOT / "solutions" / assignment).glob("*.ipynb")
    lines, inside = set(), False
    for cell in json.loads(path.read_text())["cells"]:
        for line in "".join(cell["source"]).splitlines() if cell["cell_type"] == "code" else ():
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
                continue
            line = " ".join(re.sub(r"\s+#.*$", "", line).split())
            if inside and len(line) >= 12 and not line.startswith("#"):
                lines.add(line)
    return lines


def test_no_message_prints_an_answer_line():
    """Does no text of the 10.7 checks (messages, Mistake hints, the contract's HOW), on either side, hold
    a line of the solution, with or without its self.? (A hint names the mistake and where to look.)"""
    import ast

    from tests.answers import ROOT

    lines = answer_lines("10.7-gpt")
    assert len(lines) > 30
    found = []
    for folder in ("course/visible/s10_7", "grader/checks/s10_7"):
        for path in sorted((ROOT / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = " ".join(node.value.split())
                    found += [f"{path.name}:{node.lineno}: {line}" for line in lines
                              if line in text or line.replace("self.", "") in text.replace("self.", "")]
    assert not found, found
