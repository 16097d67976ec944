"""Visible check of ``SwiGLU(d_model, d_ff)``, Llama's feed-forward network, and its known mistakes.

The reference is ``F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)`` with the weights
copied from the learner's module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    compare_outputs,
    expect_linear_layers,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)

HOW = ("Create, in this order: w1 = nn.Linear(d_model, d_ff, bias=False) (the gate), w2 = nn.Linear(d_ff, "
       "d_model, bias=False) (down), w3 = nn.Linear(d_model, d_ff, bias=False) (up).")
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
CASES = [  # name, d_model, d_ff, shape of x's leading dims, dtype
    ("x (2, 3, 6), d_ff 10, float32", 6, 10, (2, 3), torch.float32),
    ("x (2, 2, 3, 4), d_ff 7, float64", 4, 7, (2, 2, 3), torch.float64),
    ("2-D x (5, 6), d_ff 4, float64", 6, 4, (5,), torch.float64),
]


def shapes(d_model: int, d_ff: int) -> dict[str, tuple]:
    return {"w1": (d_ff, d_model), "w2": (d_model, d_ff), "w3": (d_ff, d_model)}


def expect_layout(module, d_model: int, d_ff: int) -> None:
    """Three bias-free nn.Linear layers w1, w2, w3, created in that order, and no other parameter."""
    if not isinstance(module, nn.Module):
        raise CheckFailure(f"SwiGLU(...) should create an nn.Module, not a {type(module).__name__}.")
    expect_linear_layers(module, "SwiGLU", shapes(d_model, d_ff), HOW, bias=False)
    order = [name for name in module._modules if name in ("w1", "w2", "w3")]
    if order != ["w1", "w2", "w3"]:
        raise CheckFailure(f"SwiGLU creates its layers in the order {', '.join(order)}: create them in the "
                           f"contract's order (so that a seed gives everyone the same weights). {HOW}")


def seeded_weights(d_model: int, d_ff: int, seed: int, dtype, device="cpu") -> dict[str, torch.Tensor]:
    g = generator(seed + 613)
    return {f"{name}.weight": randn(shape, g, dtype, device, 0.5)
            for name, shape in shapes(d_model, d_ff).items()}


def swiglu(x, p: dict[str, torch.Tensor], gate=F.silu) -> torch.Tensor:
    """The reference (``gate`` F.silu) and its mistakes (another gate, or one of ACTIVATIONS' names)."""
    a, b = F.linear(x, p["w1.weight"]), F.linear(x, p["w3.weight"])  # (..., d_ff) each
    hidden = {"swapped": lambda: a * F.silu(b), "product": lambda: F.silu(a * b),
              "no gate": lambda: F.silu(a)}.get(gate, lambda: gate(a) * b)()
    return F.linear(hidden, p["w2.weight"])  # (..., d_model)


def outputs(forward, x, leaves: dict[str, torch.Tensor], seed: int):
    """``forward(x)`` on a fresh x, with the gradients of x and of ``leaves``."""
    x = x.detach().clone().requires_grad_()
    return with_gradients(lambda: (forward(x),), ("output",), {"x": x, **leaves}, seed)


def reference_outputs(x, weights, seed: int, gate=F.silu):
    leaves = {k: v.detach().clone().requires_grad_() for k, v in weights.items()}
    return outputs(lambda t: swiglu(t, leaves, gate), x, leaves, seed)


def load(module: nn.Module, weights: dict[str, torch.Tensor]) -> dict[str, nn.Parameter]:
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in weights.items():
            params[name].copy_(value)
    return {name: params[name] for name in weights}


def case_inputs(d_model, d_ff, lead, dtype, seed, device="cpu"):
    """Seeded x (*lead, d_model) and weights."""
    x = randn((*lead, d_model), generator(seed), dtype, device)
    return x, seeded_weights(d_model, d_ff, seed, dtype, device)


def variants(x, weights, seed: int) -> dict:
    return {m: (lambda gate=gate: reference_outputs(x, weights, seed, gate))
            for m, gate in ACTIVATIONS.items()}


def learner_outputs(module, x, weights, where: str, seed: int, call=call_learner):
    """The learner's module holding ``weights``: output and gradients; ``call`` runs learner code."""
    params = load(module, weights)
    module.zero_grad()

    def forward(t):
        return expect_tensor(call("SwiGLU.forward", where, module, t), "SwiGLU.forward", where)
    return outputs(forward, x, params, seed)


@visible_check
def check_SwiGLU(SwiGLU) -> None:
    """Layout, then output and gradients against w2(silu(w1 x) * w3 x) with the same weights."""
    for seed, (case, d_model, d_ff, lead, dtype) in enumerate(CASES):
        where = f"case '{case}'"
        module = call_learner("SwiGLU", f"SwiGLU({d_model}, {d_ff})", SwiGLU, d_model, d_ff)
        expect_layout(module, d_model, d_ff)
        x, weights = case_inputs(d_model, d_ff, lead, dtype, seed)
        got = learner_outputs(module.to(dtype), x, weights, where, seed)
        compare_outputs(got, reference_outputs(x, weights, seed), "SwiGLU", where,
                        against=AGAINST, variants=variants(x, weights, seed))
    passed("SwiGLU gates w3(x) with SiLU of w1(x) and projects back with w2, on 2-D to 4-D inputs, gradients "
           "too.")
