"""``SwiGLU(d_model, d_ff)``, Llama's feed-forward network: the exercise (inputs, reference, known
mistakes, visible cases) and its visible check.

The reference is ``F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)`` with the case's seeded
weights copied into the learner's module.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    expect_linear_layers,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.modules import load_parameters
from course.visible.s10_7.rms_norm import expect_not_shipped

HOW = ("SwiGLU has three nn.Linear layers without bias, created in this order: w1 (d_model to d_ff, the "
       "gate), w2 (d_ff to d_model, down), w3 (d_model to d_ff, up).")
FORMULA = "w2(F.silu(w1(x)) * w3(x))."
GATE_ON_UP = Mistake("gate_on_up", "SiLU on w3's branch instead of w1's (w1 and w3 swapped)",
                     "w1 is the gate, the branch that goes through SiLU: " + FORMULA)
SIGMOID_GATE = Mistake("sigmoid_gate", "a sigmoid gate (GLU) instead of SiLU",
                       "SwiGLU gates with SiLU, x * sigmoid(x) (F.silu), not the bare sigmoid: " + FORMULA)
GELU_GATE = Mistake("gelu_gate", "a GELU gate (GEGLU) instead of SiLU", "Use F.silu on w1(x): " + FORMULA)
RELU_GATE = Mistake("relu_gate", "a ReLU gate (ReGLU) instead of SiLU", "Use F.silu on w1(x): " + FORMULA)
SILU_OF_PRODUCT = Mistake("silu_of_product", "SiLU of the product w1(x) * w3(x) instead of the gate alone",
                          "Only the gate goes through SiLU, then it multiplies w3(x): " + FORMULA)
NO_GATE = Mistake("no_gate", "no gating: w2(silu(w1(x))), the up projection w3 unused",
                  "Multiply the gate by the up projection: " + FORMULA)
ACTIVATIONS = {GATE_ON_UP: "swapped", SIGMOID_GATE: torch.sigmoid, GELU_GATE: F.gelu, RELU_GATE: F.relu,
               SILU_OF_PRODUCT: "product", NO_GATE: "no gate"}
AGAINST = "w2(F.silu(w1(x)) * w3(x)) with the same weights"


def dims(d_model: int, d_ff: int, lead: tuple[int, ...]) -> dict:
    """A case: x (*lead, d_model) and the hidden width d_ff."""
    return {"dims": (d_model, d_ff, lead)}


CASES = [
    Case("x (2, 3, 6), d_ff 10, float32", 0, dims(6, 10, (2, 3)), torch.float32, kind="3-D x"),
    Case("x (2, 2, 3, 4), d_ff 7, float64", 1, dims(4, 7, (2, 2, 3)), kind="4-D x"),
    Case("2-D x (5, 6), d_ff 4, float64", 2, dims(6, 4, (5,)), kind="2-D x"),
    Case("d_model 1: x (2, 3, 1), d_ff 5, float64", 3, dims(1, 5, (2, 3)), kind="d_model 1"),
]


def shapes(d_model: int, d_ff: int) -> dict[str, tuple]:
    return {"w1": (d_ff, d_model), "w2": (d_model, d_ff), "w3": (d_ff, d_model)}


def expect_layout(module, d_model: int, d_ff: int) -> None:
    """Three bias-free nn.Linear layers w1, w2, w3, created in that order, and no other parameter."""
    expect_linear_layers(module, "SwiGLU", shapes(d_model, d_ff), HOW, bias=False)
    order = [name for name in module._modules if name in ("w1", "w2", "w3")]
    if order != ["w1", "w2", "w3"]:
        raise CheckFailure(f"SwiGLU creates its layers in the order {', '.join(order)}: create them in the "
                           f"contract's order (so that a seed gives everyone the same weights). {HOW}")


def inputs(case: Case, device) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Seeded x (*lead, d_model), a leaf, and the weights by the contract's names."""
    d_model, d_ff, lead = case.params["dims"]
    x = randn((*lead, d_model), generator(case.seed), case.dtype, device).requires_grad_()
    g = generator(case.seed + 613)
    return x, {f"{name}.weight": randn(shape, g, case.dtype, device, 0.5)
               for name, shape in shapes(d_model, d_ff).items()}


def swiglu(x, p: dict[str, torch.Tensor], gate=F.silu) -> torch.Tensor:
    """The reference (``gate`` F.silu) and its mistakes (another gate, or one of ACTIVATIONS' names)."""
    a, b = F.linear(x, p["w1.weight"]), F.linear(x, p["w3.weight"])  # (..., d_ff) each
    hidden = {"swapped": lambda: a * F.silu(b), "product": lambda: F.silu(a * b),
              "no gate": lambda: F.silu(a)}.get(gate, lambda: gate(a) * b)()
    return F.linear(hidden, p["w2.weight"])  # (..., d_model)


def outputs(case: Case, device, gate=F.silu):
    """The reference's output and gradients on a case (``gate``: a known mistake's)."""
    x, p = inputs(case, device)
    p = {k: v.requires_grad_() for k, v in p.items()}
    return with_gradients(lambda: (swiglu(x, p, gate),), ("output",), {"x": x, **p}, case.seed)


class SwiGLUModule(Exercise):
    name = "SwiGLU"
    reference_name = AGAINST
    mistakes = {m: partial(outputs, gate=gate) for m, gate in ACTIVATIONS.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        d_model, d_ff, _ = case.params["dims"]
        module = self.build(impl, case, d_model, d_ff)
        expect_not_shipped(module, self.name)
        expect_layout(module, d_model, d_ff)
        x, p = inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            return (expect_tensor(self.call(case, module, x), "SwiGLU.forward", case),)

        return with_gradients(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return outputs(case, device)


@visible_check
def check_SwiGLU(SwiGLU) -> None:
    """Layout, then output and gradients against w2(silu(w1 x) * w3 x) with the same weights."""
    SwiGLUModule().run_cases(SwiGLU)
    passed("SwiGLU gates w3(x) with SiLU of w1(x) and projects back with w2, on 2-D to 4-D inputs, gradients "
           "too.")
