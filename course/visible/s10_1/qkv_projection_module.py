"""Visible check of ``QKVProjection(d_model, d_k, d_v)``, and its known mistakes."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_linear_layers,
    expect_tuple,
    passed,
    seeded,
    visible_check,
    with_gradients,
)

QKV = ("Q", "K", "V")
HOW = ("Create three separate layers, in this order: w_q and w_k, each an nn.Linear(d_model, d_k, "
       "bias=False), then w_v, an nn.Linear(d_model, d_v, bias=False).")
K_FROM_W_Q = Mistake("k_from_w_q", "K computed with w_q", "K = self.w_k(x).")
SWAPPED_LAYERS = Mistake("swapped_layers", "w_q and w_k swapped", "Q = self.w_q(x), K = self.w_k(x).")
CASES = [("a batch of 2 sentences, float32", torch.float32), ("float64", torch.float64)]


def _outputs(module: nn.Module, call, dtype, seed: int) -> dict:
    """``call(x)`` with the module's layers, with the gradients of x and the three weights."""
    x = seeded(2, 4, 8, seed=50 + seed, dtype=dtype).requires_grad_()
    module.zero_grad()
    leaves = {"x": x, **{f"{n}.weight": getattr(module, n).weight for n in ("w_q", "w_k", "w_v")}}
    return with_gradients(lambda: call(x), QKV, leaves, seed)


def _layers(module: nn.Module, order):
    return lambda x: tuple(F.linear(x, getattr(module, name).weight) for name in order)


@visible_check
def check_QKVProjection(QKVProjection) -> None:
    """The layers, then Q, K, V and gradients against nn.Linear with the module's own weights."""
    module = call_learner("QKVProjection", "QKVProjection(8, 3, 6)", QKVProjection, 8, 3, 6)
    if not isinstance(module, nn.Module):
        raise CheckFailure(f"QKVProjection(...) should create an nn.Module, not a {type(module).__name__}.")
    expect_linear_layers(module, "QKVProjection", {"w_q": (3, 8), "w_k": (3, 8), "w_v": (6, 8)}, HOW,
                         bias=False)
    with torch.no_grad():  # seeded weights, so that the check is the same for everyone
        for i, name in enumerate(("w_q", "w_k", "w_v")):
            layer = getattr(module, name)
            layer.weight.copy_(seeded(*layer.weight.shape, seed=40 + i))
    for seed, (case, dtype) in enumerate(CASES):
        module = module.to(dtype)

        def learner(x, case=case, module=module):
            out = call_learner("QKVProjection.forward", f"case '{case}'", module, x)
            return expect_tuple(out, QKV, "QKVProjection.forward")

        variants = {
            K_FROM_W_Q: partial(_outputs, module, _layers(module, ("w_q", "w_q", "w_v")), dtype, seed),
            SWAPPED_LAYERS: partial(_outputs, module, _layers(module, ("w_k", "w_q", "w_v")), dtype, seed),
        }
        compare_outputs(_outputs(module, learner, dtype, seed),
                        _outputs(module, _layers(module, ("w_q", "w_k", "w_v")), dtype, seed),
                        "QKVProjection", f"case '{case}'", against="nn.Linear with the module's weights",
                        variants=variants)
    x = torch.ones(2, 3, 8, dtype=module.w_q.weight.dtype)  # made outside the probe
    check_unplaced_tensors("QKVProjection", lambda: module(x))
    passed("QKVProjection has three separate layers and computes Q, K, V (gradients too).")
