"""``FeedForward(d_model, d_ff, activation="relu", dropout=0.0)``: the exercise (inputs, reference,
known mistakes, visible cases) and its visible check."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from course.checking import (
    Case,
    Exercise,
    Mistake,
    expect_linear_layers,
    expect_tensor,
    expect_value_error,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.blocks import DROPPING, UNSCALED_DROPOUT, dropout_scale, kept_scale, unscaled_scale
from course.checking.exercise import seeded_parameters
from course.checking.modules import load_parameters
from course.visible.s10_5.dropout import expect_dropout_modes

HOW = ("Create, in this order, linear1 (a linear layer from d_model to d_ff, with bias) and linear2 "
       "(from d_ff back to d_model, with bias); the activation and dropout have no parameters.")
UNKNOWN_ACTIVATION = "for activation='tanh' (only 'relu' and 'gelu' are known)"
NO_ACTIVATION = Mistake("no_activation", "a feed-forward network without its activation",
                        "The activation belongs between linear1 and linear2: without the non-linearity "
                        "the two layers collapse into one linear map.")
RELU_ALWAYS = Mistake("relu_always", "ReLU used although activation='gelu'",
                      "Choose the activation from the activation argument: 'gelu' asks for the exact GELU.")
GELU_ALWAYS = Mistake("gelu_always", "GELU used although activation='relu'",
                      "Choose the activation from the activation argument: 'relu' asks for ReLU.")
TANH_GELU = Mistake("tanh_gelu", "the tanh approximation of GELU", "nn.TransformerEncoderLayer uses the "
                    "exact GELU, z·Phi(z) (PyTorch's default), not its tanh approximation.")
TWICE = Mistake("activation_after_linear2", "an activation after linear2 as well",
                "Only the hidden layer gets the activation; linear2's output is returned as it is.")
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def dims(B: int, n: int, d_model: int, d_ff: int, activation: str, dropout: float = 0.0) -> dict:
    """A case: x (B, n, d_model), the hidden width d_ff, the activation and, in train() mode, the dropout
    (0 < dropout < 1: only the scale of what it keeps is compared; then d_ff == d_model)."""
    return {"dims": (B, n, d_model, d_ff), "activation": activation, "dropout": dropout}


def dropping(params) -> bool:
    """A case in train() mode with 0 < dropout < 1."""
    return 0 < params.get("dropout", 0.0) < 1


CASES = [
    Case("relu, B=2, n=3, d_model=6, d_ff=10", 80, dims(2, 3, 6, 10, "relu"), torch.float32, kind="relu"),
    Case("gelu, float64", 81, dims(2, 3, 6, 10, "gelu"), kind="gelu"),
    Case("relu, d_ff smaller than d_model, float64", 82, dims(3, 4, 8, 5, "relu"), kind="d_ff smaller"),
    Case("gelu, B=1, n=7, d_model=4, d_ff=16", 83, dims(1, 7, 4, 16, "gelu"), torch.float32, kind="gelu"),
    Case("relu, dropout=0.25 in train() mode", 84, dims(2, 6, 8, 8, "relu", 0.25), kind=DROPPING),
]
SCALE = "the scale of what the hidden layer's dropout keeps"  # 1 / (1 - p), whatever the masks


def ffn_shapes(d_model: int, d_ff: int, prefix: str = "") -> dict[str, tuple]:
    """The contract's parameters, (out_features, in_features) for the weights."""
    return {f"{prefix}linear1.weight": (d_ff, d_model), f"{prefix}linear1.bias": (d_ff,),
            f"{prefix}linear2.weight": (d_model, d_ff), f"{prefix}linear2.bias": (d_model,)}


def inputs(case: Case, device):
    """x and the seeded parameters of a case, leaves that collect gradients."""
    B, n, d_model, d_ff = case.params["dims"]
    x = randn((B, n, d_model), generator(case.seed), case.dtype, device).requires_grad_()
    params = seeded_parameters(ffn_shapes(d_model, d_ff), case, device)
    return x, {k: v.requires_grad_() for k, v in params.items()}


def ffn(x, p, activation, prefix="", *, variant: str = "ok"):
    """linear2(phi(linear1(x))) with PyTorch's functions and the parameters ``p``; ``variant``
    switches on a known mistake."""
    hidden = F.linear(x, p[f"{prefix}linear1.weight"], p[f"{prefix}linear1.bias"])
    if variant == "tanh_gelu":
        hidden = F.gelu(hidden, approximate="tanh")
    elif variant in ("relu_always", "gelu_always"):
        hidden = ACTIVATIONS[variant.removesuffix("_always")](hidden)
    elif variant != "no_activation":
        hidden = ACTIVATIONS[activation](hidden)
    out = F.linear(hidden, p[f"{prefix}linear2.weight"], p[f"{prefix}linear2.bias"])
    return ACTIVATIONS[activation](out) if variant == "activation_after_linear2" else out


def outputs(case: Case, device, variant: str = "ok") -> dict:
    """The feed-forward network's output and gradients on a case (``variant``: a known mistake)."""
    if dropping(case.params):
        return {}  # only the scale is compared there
    x, p = inputs(case, device)
    return with_gradients(lambda: (ffn(x, p, case.params["activation"], variant=variant),), ("output",),
                          {"x": x, **p}, case.seed)


class FeedForwardModule(Exercise):
    name = "FeedForward"
    reference_name = "nn.Linear, the activation, nn.Linear with the same weights"
    mistakes = {**{mistake: partial(outputs, variant=mistake.name) for mistake in
                   (NO_ACTIVATION, RELU_ALWAYS, GELU_ALWAYS, TANH_GELU, TWICE)},
                UNSCALED_DROPOUT: lambda case, device: (
                    {SCALE: unscaled_scale(device)} if dropping(case.params) else {})}
    visible_cases = CASES

    def run(self, impl, case, device):
        d_model, d_ff = case.params["dims"][2:]
        module = self.build(impl, case, d_model, d_ff, activation=case.params["activation"],
                            **({"dropout": case.params["dropout"]} if dropping(case.params) else {}))
        expect_linear_layers(module, self.name, {"linear1": (d_ff, d_model), "linear2": (d_model, d_ff)}, HOW,
                             bias=True)
        x, p = inputs(case, device)
        if dropping(case.params):
            if not self.probing:  # the dropout case's own first check (off in eval(), on in train())
                self.dropout_modes(impl)
            return {SCALE: self.hidden_scale(module.to(device), case, x.detach(), p).to(device)}
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            return (expect_tensor(self.call(case, module, x), f"{self.name}'s output", case),)

        return with_gradients(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        if dropping(case.params):
            return {SCALE: dropout_scale(case.params["dropout"], device)}
        return outputs(case, device)

    def hidden_scale(self, module, case: Case, x: torch.Tensor, p: dict) -> torch.Tensor:
        """In train() mode, with linear2 the identity (d_ff == d_model, no bias), the output is the dropped
        hidden layer itself: its ratio to phi(linear1(x)) where kept, 1 / (1 - p) for nn.Dropout."""
        identity = {"linear2.weight": torch.eye(x.shape[-1], dtype=x.dtype, device=x.device),
                    "linear2.bias": torch.zeros(x.shape[-1], dtype=x.dtype, device=x.device)}
        load_parameters(module, {**p, **identity}, self.name, HOW)
        with torch.no_grad():
            out = expect_tensor(self.call(case, module.train(), x), f"{self.name}'s output", case)
            phi = ACTIVATIONS[case.params["activation"]]
            hidden = phi(F.linear(x, p["linear1.weight"], p["linear1.bias"]))  # (B, n, d_ff)
        return kept_scale([(hidden, out)])

    def dropout(self, impl, x: torch.Tensor, *args, **kwargs) -> None:
        """With dropout=0.5 the module drops in train() mode only (``impl(*args, dropout=p, **kwargs)``)."""
        expect_dropout_modes(self.name, lambda p: impl(*args, dropout=p, **kwargs), x,
                             lambda where, fn, *a: self.call(where, fn, *a))

    def dropout_modes(self, impl) -> None:
        """Off in eval(), on in train(), at dropout=0.5."""
        self.dropout(impl, randn((2, 50, 8), generator(898), torch.float32), 8, 32, activation="gelu")

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 16, activation="tanh"), UNKNOWN_ACTIVATION)


@visible_check
def check_FeedForward(FeedForward) -> None:
    """Its layers, relu and gelu against PyTorch (gradients too), the ValueError, dropout: off in eval(), on
    in train(), what it keeps scaled by 1 / (1 - p)."""
    FeedForwardModule().run_cases(FeedForward)
    passed("FeedForward has the right layers, both activations, dropout (off in eval(), on in train(), what "
           "it keeps scaled by 1 / (1 - p)), and rejects unknown activations.")
