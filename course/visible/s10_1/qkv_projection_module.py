"""``QKVProjection(d_model, d_k, d_v)``: the exercise (inputs, reference, known mistakes, visible
cases) and its visible check."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    Exercise,
    Mistake,
    expect_linear_layers,
    expect_tuple,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.exercise import seeded_parameters
from course.checking.modules import load_parameters
from course.visible.s10_1.qkv_projections import QKV, dims

HOW = ("The contract asks for three separate bias-free nn.Linear layers, created in the order w_q, "
       "w_k, w_v: w_q and w_k map d_model features to d_k, w_v maps d_model to d_v.")
K_FROM_W_Q = Mistake("k_from_w_q", "K computed with w_q",
                     "The keys have their own layer, w_k: look at which layer forward applies to make K.")
SWAPPED_LAYERS = Mistake("swapped_layers", "w_q and w_k swapped",
                         "Q must come from w_q and K from w_k: look at which layer makes each, and at the "
                         "order of the tuple forward returns (Q, K, V).")
LAYERS = ("w_q", "w_k", "w_v")
CASES = [Case("a batch of 2 sentences, float32", 50, dims((2,), 4, 8, 3, 6), torch.float32, kind="3-D"),
         Case("float64, d_k equal to d", 51, dims((2,), 4, 8, 8, 6), kind="d_k equal to d")]


def shapes(case: Case) -> dict[str, tuple[int, int]]:
    """The layers' weights, (out_features, in_features)."""
    d, d_k, d_v = (case.params[k] for k in ("d", "d_k", "d_v"))
    return {"w_q.weight": (d_k, d), "w_k.weight": (d_k, d), "w_v.weight": (d_v, d)}


def inputs(case: Case, device):
    """x (a leaf) and the seeded weights of a case."""
    p = case.params
    x = randn((*p["lead"], p["n"], p["d"]), generator(case.seed), case.dtype, device)
    return x.requires_grad_(), seeded_parameters(shapes(case), case, device)


def through_layers(case: Case, device, order=LAYERS) -> dict:
    """Q, K, V from the layers' weights (F.linear, as nn.Linear), layers in the order given."""
    x, weights = inputs(case, device)
    leaves = {"x": x, **{k: w.requires_grad_() for k, w in weights.items()}}
    return with_gradients(lambda: tuple(F.linear(x, weights[f"{n}.weight"]) for n in order), QKV, leaves,
                          case.seed)


class QKVProjectionModule(Exercise):
    name = "QKVProjection"
    reference_name = "three nn.Linear(bias=False) layers with the same weights"
    mistakes = {K_FROM_W_Q: partial(through_layers, order=("w_q", "w_q", "w_v")),
                SWAPPED_LAYERS: partial(through_layers, order=("w_k", "w_q", "w_v"))}
    visible_cases = CASES

    def run(self, impl, case, device):
        p = case.params
        module = self.build(impl, case, p["d"], p["d_k"], p["d_v"])
        expect_linear_layers(module, self.name, {n: shapes(case)[f"{n}.weight"] for n in LAYERS}, HOW,
                             bias=False)
        x, weights = inputs(case, device)
        params = load_parameters(module.to(device), weights, self.name, HOW)

        def call():
            return expect_tuple(self.call(case, module, x), QKV, f"{self.name}.forward", case)

        return with_gradients(call, QKV, {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return through_layers(case, device)


@visible_check
def check_QKVProjection(QKVProjection) -> None:
    """The layers, then Q, K, V and gradients against nn.Linear with the module's own weights."""
    QKVProjectionModule().run_cases(QKVProjection)
    passed("QKVProjection has three separate layers and computes Q, K, V (gradients too).")
