"""Visible check of ``qkv_projections(X, W_q, W_k, W_v) -> (Q, K, V)``, and its known mistakes."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_tuple,
    passed,
    seeded,
    visible_check,
    with_gradients,
)

QKV = ("Q", "K", "V")
HINT = "Q = X @ W_q, K = X @ W_k, V = X @ W_v."
SWAPPED = Mistake("swapped", "W_q and W_k swapped (Q computed with W_k)", HINT)
K_FROM_Q = Mistake("k_from_q", "K computed with W_q", HINT)

# Every dimension differs, so a swapped axis cannot hide.
CASES = [  # name, leading dims, n, d, d_k, d_v, dtype
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


def _outputs(call, dims, seed: int, order=("W_q", "W_k", "W_v")):
    """``call(X, W_1, W_2, W_3)`` on fresh inputs, with gradients; W's in the order given."""
    x = _inputs(*dims, seed=10 * seed)
    return with_gradients(lambda: call(x["X"], *(x[w] for w in order)), QKV, x, seed)


def _linear(X, *weights):
    """Q, K, V as nn.Linear(bias=False) computes them with weight W^T (F.linear)."""
    return tuple(F.linear(X, W.T) for W in weights)


@visible_check
def check_qkv_projections(qkv_projections) -> None:
    """Shapes, values and gradients against nn.Linear, on 2-D, 3-D and 4-D inputs."""
    for seed, (case, *dims) in enumerate(CASES):
        def learner(*args, case=case):
            out = call_learner("qkv_projections", f"case '{case}'", qkv_projections, *args)
            return expect_tuple(out, QKV, "qkv_projections")

        variants = {SWAPPED: partial(_outputs, _linear, dims, seed, ("W_k", "W_q", "W_v")),
                    K_FROM_Q: partial(_outputs, _linear, dims, seed, ("W_q", "W_q", "W_v"))}
        compare_outputs(_outputs(learner, dims, seed), _outputs(_linear, dims, seed), "qkv_projections",
                        f"case '{case}'", against="nn.Linear(bias=False) with the same weights",
                        variants=variants)
    X, W_qk, W_v = torch.ones(2, 3, 5), torch.ones(5, 4), torch.ones(5, 6)  # made outside the probe
    check_unplaced_tensors("qkv_projections", lambda: qkv_projections(X, W_qk, W_qk, W_v))
    passed("qkv_projections matches nn.Linear(bias=False) on 2-D, 3-D and 4-D inputs, gradients too.")
