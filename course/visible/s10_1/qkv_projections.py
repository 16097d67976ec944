"""``qkv_projections(X, W_q, W_k, W_v) -> (Q, K, V)``: the exercise (inputs, reference, known
mistakes, visible cases) and its visible check."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    Exercise,
    Mistake,
    expect_tuple,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.forbidden import LINEAR

QKV = ("Q", "K", "V")
SWAPPED = Mistake("swapped", "W_q and W_k swapped (Q computed with W_k)",
                  "Each view has its own weight: look at which weight each of your products uses, "
                  "and at the order of the tuple you return (Q, K, V).")
K_FROM_Q = Mistake("k_from_q", "K computed with W_q",
                   "The keys have their own weight, W_k: look at the product that makes K.")


def dims(lead: tuple, n: int, d: int, d_k: int, d_v: int) -> dict:
    """A case's shapes: X (*lead, n, d), W_q and W_k (d, d_k), W_v (d, d_v)."""
    return {"lead": lead, "n": n, "d": d, "d_k": d_k, "d_v": d_v}


# Every dimension differs, so a swapped axis cannot hide.
CASES = [
    Case("one sentence, X (n=4, d=8)", 10, dims((), 4, 8, 3, 6), torch.float32, kind="2-D"),
    Case("a batch, X (2, 4, 8)", 11, dims((2,), 4, 8, 3, 6), torch.float32, kind="3-D"),
    Case("a batch of heads, X (2, 3, 4, 8)", 12, dims((2, 3), 4, 8, 5, 2), torch.float32, kind="4-D"),
    Case("float64, a batch with d_k equal to d", 13, dims((2,), 3, 5, 5, 6), kind="d_k equal to d"),
]


def inputs(case: Case, device) -> dict[str, torch.Tensor]:
    """X and the three weight matrices of a case, leaves that collect gradients."""
    p, g = case.params, generator(case.seed)
    shapes = {"X": (*p["lead"], p["n"], p["d"]), "W_q": (p["d"], p["d_k"]),
              "W_k": (p["d"], p["d_k"]), "W_v": (p["d"], p["d_v"])}
    return {k: randn(s, g, case.dtype, device).requires_grad_() for k, s in shapes.items()}


def through_linear(case: Case, device, order=("W_q", "W_k", "W_v")) -> dict:
    """Q, K, V as nn.Linear(bias=False) computes them (F.linear with W^T), weights in the order given."""
    x = inputs(case, device)
    return with_gradients(lambda: tuple(F.linear(x["X"], x[w].T) for w in order), QKV, x, case.seed)


class QKVProjections(Exercise):
    forbidden = LINEAR
    name = "qkv_projections"
    reference_name = "nn.Linear(bias=False) with the same weights"
    mistakes = {SWAPPED: partial(through_linear, order=("W_k", "W_q", "W_v")),
                K_FROM_Q: partial(through_linear, order=("W_q", "W_q", "W_v"))}
    visible_cases = CASES

    def run(self, impl, case, device):
        x = inputs(case, device)

        def call():
            out = self.call(case, impl, x["X"], x["W_q"], x["W_k"], x["W_v"])
            return expect_tuple(out, QKV, self.name, case)

        return with_gradients(call, QKV, x, case.seed)

    def reference(self, case, device):
        return through_linear(case, device)


@visible_check
def check_qkv_projections(qkv_projections) -> None:
    """Shapes, values and gradients against nn.Linear, on 2-D, 3-D and 4-D inputs."""
    QKVProjections().run_cases(qkv_projections)
    passed("qkv_projections matches nn.Linear(bias=False) on 2-D, 3-D and 4-D inputs, gradients too.")
