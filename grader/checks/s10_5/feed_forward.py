"""Hidden check of ``FeedForward``: against nn.Linear, nn.ReLU / nn.GELU, nn.Linear with its weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course.visible.s10_5.dropout import expect_dropout_modes
from course.visible.s10_5.feed_forward import (
    HOW,
    NO_ACTIVATION,
    RELU_ALWAYS,
    TANH_GELU,
    TWICE,
    UNKNOWN_ACTIVATION,
)
from grader.checks.core import Case, Outputs, call_learner, expect_tensor, generator, randn
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    expect_value_error,
    forward_backward,
    load_parameters,
    registered,
    seeded_parameters,
)

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}
CASES = [  # B, n, d_model, d_ff
    Case("relu, B=2, n=3, d_model=6, d_ff=10", 800, {"dims": (2, 3, 6, 10), "activation": "relu"}),
    Case("gelu, B=2, n=3, d_model=6, d_ff=10", 801, {"dims": (2, 3, 6, 10), "activation": "gelu"}),
    Case("relu, d_ff smaller than d_model", 802, {"dims": (3, 4, 8, 5), "activation": "relu"}),
    Case("gelu, B=1, n=7, d_model=4, d_ff=16", 803, {"dims": (1, 7, 4, 16), "activation": "gelu"}),
    Case("float32, gelu", 804, {"dims": (2, 5, 12, 20), "activation": "gelu"}, torch.float32),
    Case("float32, relu", 805, {"dims": (2, 5, 12, 20), "activation": "relu"}, torch.float32),
]


def ffn_shapes(d_model: int, d_ff: int, prefix: str = "") -> dict[str, tuple]:
    return {f"{prefix}linear1.weight": (d_ff, d_model), f"{prefix}linear1.bias": (d_ff,),
            f"{prefix}linear2.weight": (d_model, d_ff), f"{prefix}linear2.bias": (d_model,)}


def _inputs(case: Case, device: torch.device):
    B, n, d_model, d_ff = case.params["dims"]
    x = randn((B, n, d_model), generator(case.seed), case.dtype, device).requires_grad_()
    params = {k: v.requires_grad_()
              for k, v in seeded_parameters(ffn_shapes(d_model, d_ff), case, device).items()}
    return x, params


def ffn(x, p, activation, prefix="", *, variant: str = "ok"):
    """linear2(phi(linear1(x))) from the parameters ``p``; ``variant`` switches on a mistake."""
    hidden = F.linear(x, p[f"{prefix}linear1.weight"], p[f"{prefix}linear1.bias"])
    if variant == "tanh_gelu":
        hidden = F.gelu(hidden, approximate="tanh")
    elif variant == "relu_always":
        hidden = F.relu(hidden)
    elif variant != "no_activation":
        hidden = ACTIVATIONS[activation](hidden)
    out = F.linear(hidden, p[f"{prefix}linear2.weight"], p[f"{prefix}linear2.bias"])
    if variant == "activation_after_linear2":
        out = ACTIVATIONS[activation](out)
    return out


def _variant(variant: str):
    def run(case: Case, device: torch.device) -> Outputs:
        x, p = _inputs(case, device)
        return forward_backward(lambda: (ffn(x, p, case.params["activation"], variant=variant),),
                                ("output",), {"x": x, **p}, case.seed)
    return run


def _torch_ffn(case: Case, device: torch.device) -> Outputs:
    """nn.Linear, nn.ReLU / nn.GELU, nn.Linear holding the case's parameters."""
    d_model, d_ff = case.params["dims"][2:]
    x, p = _inputs(case, device)
    linear1 = torch.nn.Linear(d_model, d_ff).to(device, case.dtype)
    linear2 = torch.nn.Linear(d_ff, d_model).to(device, case.dtype)
    with torch.no_grad():
        for name, layer in (("linear1", linear1), ("linear2", linear2)):
            layer.weight.copy_(p[f"{name}.weight"])
            layer.bias.copy_(p[f"{name}.bias"])
    phi = torch.nn.ReLU() if case.params["activation"] == "relu" else torch.nn.GELU()
    leaves = {"x": x, "linear1.weight": linear1.weight, "linear1.bias": linear1.bias,
              "linear2.weight": linear2.weight, "linear2.bias": linear2.bias}
    return forward_backward(lambda: (linear2(phi(linear1(x))),), ("output",), leaves, case.seed)


def dropout_modes(exercise: Exercise, make, x: torch.Tensor) -> None:
    """The shared dropout check, learner code run under the exercise's tripwires."""
    case = Case("dropout=0.5", 899, {}, torch.float32)
    expect_dropout_modes(exercise.name, make, x,
                         lambda where, fn, *args: call_learner(exercise.name, exercise.forbidden, case, fn,
                                                               *args))


@registered
class FeedForwardModule(Exercise):
    name = "FeedForward"
    mistakes = {NO_ACTIVATION: _variant("no_activation"), RELU_ALWAYS: _variant("relu_always"),
                TANH_GELU: _variant("tanh_gelu"), TWICE: _variant("activation_after_linear2")}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        d_model, d_ff = case.params["dims"][2:]
        module = build_module(self.name, self.forbidden, case, impl, d_model, d_ff,
                              activation=case.params["activation"])
        x, p = _inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            return (expect_tensor(call_learner(self.name, self.forbidden, case, module, x),
                                  f"{self.name}'s output", case),)

        return forward_backward(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return _torch_ffn(case, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 16, activation="tanh"), UNKNOWN_ACTIVATION)
        dropout_modes(self, lambda dropout: impl(8, 32, activation="gelu", dropout=dropout),
                      torch.randn(2, 50, 8, generator=generator(898)))

        def on(dev):
            impl(8, 16, activation="gelu").to(dev)(torch.zeros(2, 3, 8, device=dev))

        check_device_independence(self.name, on)
