"""Visible checks of 10.1 Self-attention: queries, keys and values.

References: ``nn.Linear(d, ·, bias=False)`` layers holding the learner's weights.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.compare import Mistake
from course.testing import (
    VisibleCheckFailure,
    check_outputs,
    check_pair,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)

QKV = ("Q", "K", "V")
HINT = "Q = X @ W_q, K = X @ W_k, V = X @ W_v."

# Every dimension differs, so a swapped axis cannot hide.
PROJECTION_CASES = [  # name, leading dims, n, d, d_k, d_v, dtype
    ("one sentence, X (n=4, d=8)", (), 4, 8, 3, 6, torch.float32),
    ("a batch, X (2, 4, 8)", (2,), 4, 8, 3, 6, torch.float32),
    ("a batch of heads, X (2, 3, 4, 8)", (2, 3), 4, 8, 5, 2, torch.float32),
    ("float64, a batch with d_k equal to d", (2,), 3, 5, 5, 6, torch.float64),
]


def _inputs(lead, n, d, d_k, d_v, dtype, seed):
    """X and the three weight matrices, fresh leaves that collect gradients."""
    shapes = {"X": (*lead, n, d), "W_q": (d, d_k), "W_k": (d, d_k), "W_v": (d, d_v)}
    return {name: seeded(*shape, seed=seed + i, dtype=dtype).requires_grad_()
            for i, (name, shape) in enumerate(shapes.items())}


def _through_linear(x, weights):
    """Q, K, V as nn.Linear(bias=False) computes them with weight W^T (F.linear), in the order given."""
    return tuple(F.linear(x, W.T) for W in weights)


def _projection_outputs(call, dims, seed: int, order=("W_q", "W_k", "W_v")):
    """``call(X, W_1, W_2, W_3)`` on fresh inputs, with gradients; W's in the order given."""
    x = _inputs(*dims, seed=10 * seed)
    return with_gradients(lambda: call(x["X"], *(x[w] for w in order)), QKV, x, seed)


@instant
def check_qkv_projections(qkv_projections) -> None:
    """Shapes, values and gradients against nn.Linear, on 2-D, 3-D and 4-D inputs."""
    for seed, (case, *dims) in enumerate(PROJECTION_CASES):
        def learner(*args, case=case):
            return check_pair(run_learner("qkv_projections", case, qkv_projections, *args),
                              "qkv_projections", names=QKV)

        def linear(X, *weights):
            return _through_linear(X, weights)

        mistakes = {
            "swapped": Mistake("W_q and W_k swapped (Q computed with W_k)", HINT,
                               partial(_projection_outputs, linear, dims, seed, ("W_k", "W_q", "W_v"))),
            "k_from_q": Mistake("K computed with W_q", HINT,
                                partial(_projection_outputs, linear, dims, seed, ("W_q", "W_q", "W_v"))),
        }
        check_outputs(_projection_outputs(learner, dims, seed), _projection_outputs(linear, dims, seed),
                      "qkv_projections", case, against="nn.Linear(bias=False) with the same weights",
                      mistakes=mistakes)
    passed("qkv_projections matches nn.Linear(bias=False) on 2-D, 3-D and 4-D inputs, gradients too.")


# ---------------------------------------------------------------- the module

MODULE_HOW = ("Create three separate layers, in this order: w_q and w_k, each an nn.Linear(d_model, d_k, "
              "bias=False), then w_v, an nn.Linear(d_model, d_v, bias=False).")
MODULE_CASES = [("a batch of 2 sentences, float32", torch.float32), ("float64", torch.float64)]


def check_layers(module: nn.Module, what: str, shapes: dict[str, tuple], how: str, *,
                 bias: bool) -> None:
    """Submodules that are distinct nn.Linear layers of the given weight shapes, and nothing else."""
    for name, shape in shapes.items():
        layer = getattr(module, name, None)
        if not isinstance(layer, nn.Linear):
            raise VisibleCheckFailure(f"{what} needs an nn.Linear called {name}. {how}")
        if tuple(layer.weight.shape) != shape:
            raise VisibleCheckFailure(f"{what}.{name}.weight should have shape {shape} (out_features, "
                                      f"in_features), not {tuple(layer.weight.shape)}. {how}")
        if (layer.bias is not None) != bias:
            raise VisibleCheckFailure(f"{what}.{name} should {'' if bias else 'not '}have a bias "
                                      f"(nn.Linear(..., bias={bias})). {how}")
    check_distinct(module, what, list(shapes), how)
    expected = {f"{n}.{k}" for n in shapes for k in (("weight", "bias") if bias else ("weight",))}
    extra = sorted(set(dict(module.named_parameters())) - expected)
    if extra:
        raise VisibleCheckFailure(f"{what} has parameters it should not have: {', '.join(extra)}. {how}")


def check_distinct(module: nn.Module, what: str, names, how: str) -> None:
    """Fail when two of the named submodules are one object (two names, one set of weights)."""
    seen: dict[int, str] = {}
    for name in names:
        sub = getattr(module, name)
        if id(sub) in seen:
            raise VisibleCheckFailure(
                f"{what}.{name} is the same module as {what}.{seen[id(sub)]}: two names, one set of "
                f"weights, so they can never learn different things. {how}")
        seen[id(sub)] = name


def _module_outputs(module: nn.Module, call, dtype, seed: int) -> dict:
    """``call(x)`` with the module's layers, with the gradients of x and the three weights."""
    x = seeded(2, 4, 8, seed=50 + seed, dtype=dtype).requires_grad_()
    module.zero_grad()
    leaves = {"x": x, **{f"{n}.weight": getattr(module, n).weight for n in ("w_q", "w_k", "w_v")}}
    return with_gradients(lambda: call(x), QKV, leaves, seed)


def _linear_layers(module: nn.Module, order):
    return lambda x: tuple(F.linear(x, getattr(module, name).weight) for name in order)


@instant
def check_QKVProjection(QKVProjection) -> None:
    """The layers, then Q, K, V and gradients against nn.Linear with the module's own weights."""
    module = run_learner("QKVProjection", "QKVProjection(8, 3, 6)", QKVProjection, 8, 3, 6)
    if not isinstance(module, nn.Module):
        raise VisibleCheckFailure(f"QKVProjection(...) should create an nn.Module, not a "
                                  f"{type(module).__name__}.")
    check_layers(module, "QKVProjection", {"w_q": (3, 8), "w_k": (3, 8), "w_v": (6, 8)}, MODULE_HOW,
                 bias=False)
    with torch.no_grad():  # seeded weights, so that the check is the same for everyone
        for i, name in enumerate(("w_q", "w_k", "w_v")):
            layer = getattr(module, name)
            layer.weight.copy_(seeded(*layer.weight.shape, seed=40 + i))
    for seed, (case, dtype) in enumerate(MODULE_CASES):
        module = module.to(dtype)

        def learner(x, case=case, module=module):
            return check_pair(run_learner("QKVProjection.forward", case, module, x),
                              "QKVProjection.forward", names=QKV)

        mistakes = {
            "k_from_q": Mistake("K computed with w_q", "K = self.w_k(x).", partial(
                _module_outputs, module, _linear_layers(module, ("w_q", "w_q", "w_v")), dtype, seed)),
            "swapped": Mistake("w_q and w_k swapped", "Q = self.w_q(x), K = self.w_k(x).", partial(
                _module_outputs, module, _linear_layers(module, ("w_k", "w_q", "w_v")), dtype, seed)),
        }
        check_outputs(_module_outputs(module, learner, dtype, seed),
                      _module_outputs(module, _linear_layers(module, ("w_q", "w_k", "w_v")), dtype, seed),
                      "QKVProjection", case, against="nn.Linear with the module's weights", mistakes=mistakes)
    passed("QKVProjection has three separate layers and computes Q, K, V (gradients too).")
