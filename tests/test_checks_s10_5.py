"""10.5's hidden checks beyond "this answer passes, that bug fails" (declared in tests/answers/s10_5):
the reference's path through PyTorch, the seeded LayerNorm weights."""

from __future__ import annotations

import torch

from course.visible.s10_5 import transformer_block as block
from grader.checks.s10_5 import transformer_block


def test_reference_takes_the_plain_path():
    """Does the reference run nn.TransformerEncoderLayer in train mode, off the fused fast path?"""
    case = transformer_block.CASES[0]
    calls = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(torch.overrides.resolve_name(func) or "")
            return func(*args, **(kwargs or {}))

    with Spy():
        block.torch_outputs(case, torch.device("cpu"))
    assert "torch.nn.functional.multi_head_attention_forward" in calls
    assert "torch._transformer_encoder_layer_fwd" not in calls


def test_layer_norm_weights_are_random():
    """Are the LayerNorm weights and biases randomised, so swapped or shared norms cannot hide?"""
    _, _, p = block.inputs(transformer_block.CASES[0], torch.device("cpu"))
    assert not torch.allclose(p["norm1.weight"], torch.ones_like(p["norm1.weight"]))
    assert not torch.allclose(p["norm1.weight"], p["norm2.weight"])
    assert not torch.allclose(p["norm1.bias"], torch.zeros_like(p["norm1.bias"]))

