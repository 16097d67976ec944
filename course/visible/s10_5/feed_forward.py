"""Visible check of ``FeedForward(d_model, d_ff, activation="relu", dropout=0.0)``, and its known mistakes."""

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
    expect_tensor,
    expect_value_error,
    passed,
    seeded,
    visible_check,
    with_gradients,
)
from course.checking.blocks import ACTIVATIONS, seed_parameters
from course.visible.s10_5.dropout import expect_dropout_modes

HOW = ("Create, in this order, linear1 (an nn.Linear(d_model, d_ff)) and linear2 (an nn.Linear(d_ff, "
       "d_model)); the activation and dropout have no parameters.")
UNKNOWN_ACTIVATION = "for activation='tanh' (only 'relu' and 'gelu' are known)"
NO_ACTIVATION = Mistake("no_activation", "a feed-forward network without its activation",
                        "FFN(x) = linear2(activation(linear1(x))): without the non-linearity the two layers "
                        "collapse into one linear map.")
RELU_ALWAYS = Mistake("relu_always", "ReLU used although activation='gelu'",
                      "Choose the activation from the activation argument: nn.GELU() for 'gelu'.")
GELU_ALWAYS = Mistake("gelu_always", "GELU used although activation='relu'",
                      "Choose the activation from the activation argument: nn.ReLU() for 'relu'.")
TANH_GELU = Mistake("tanh_gelu", "the tanh approximation of GELU", "nn.TransformerEncoderLayer uses the "
                    "exact GELU: nn.GELU() or F.gelu, without approximate='tanh'.")
TWICE = Mistake("activation_after_linear2", "an activation after linear2 as well",
                "Only the hidden layer gets the activation; linear2's output is returned as it is.")
CASES = [  # name, B, n, d_model, d_ff, activation, dtype
    ("relu, B=2, n=3, d_model=6, d_ff=10", 2, 3, 6, 10, "relu", torch.float32),
    ("gelu, float64", 2, 3, 6, 10, "gelu", torch.float64),
    ("relu, d_ff smaller than d_model, float64", 3, 4, 8, 5, "relu", torch.float64),
    ("gelu, B=1, n=7, d_model=4, d_ff=16", 1, 7, 4, 16, "gelu", torch.float32),
]


def _outputs(module, call, B, n, d, dtype, seed):
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    module.zero_grad()
    return with_gradients(lambda: (call(x),), ("output",), {"x": x, **dict(module.named_parameters())}, seed)


def _torch_ffn(module, activation: str, *, variant: str = "ok"):
    """x -> linear2(activation(linear1(x))) with PyTorch's layers and the module's weights."""
    def call(x):
        hidden = F.linear(x, module.linear1.weight, module.linear1.bias)
        if variant == "tanh":
            hidden = F.gelu(hidden, approximate="tanh")
        elif variant == "relu":
            hidden = F.relu(hidden)
        elif variant == "gelu":
            hidden = F.gelu(hidden)
        elif variant != "none":
            hidden = ACTIVATIONS[activation]()(hidden)
        out = F.linear(hidden, module.linear2.weight, module.linear2.bias)
        return ACTIVATIONS[activation]()(out) if variant == "twice" else out
    return call


@visible_check
def check_FeedForward(FeedForward) -> None:
    """Its layers, relu and gelu against PyTorch (gradients too), the ValueError, dropout."""
    expect_value_error("FeedForward", lambda: FeedForward(8, 16, activation="tanh"), UNKNOWN_ACTIVATION)
    for seed, (case, B, n, d, d_ff, activation, dtype) in enumerate(CASES):
        where = f"case '{case}'"
        module = call_learner("FeedForward", where, FeedForward, d, d_ff, activation=activation)
        if not isinstance(module, nn.Module):
            raise CheckFailure("FeedForward(...) should create an nn.Module.")
        expect_linear_layers(module, "FeedForward", {"linear1": (d_ff, d), "linear2": (d, d_ff)}, HOW,
                             bias=True)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype)

        def learner(x, where=where, module=module):
            return expect_tensor(call_learner("FeedForward", where, module, x), "FeedForward's output")

        spec = (B, n, d, dtype, seed)
        variants = {mistake: partial(_outputs, module, _torch_ffn(module, activation, variant=kind), *spec)
                    for mistake, kind in ((NO_ACTIVATION, "none"), (RELU_ALWAYS, "relu"),
                                          (GELU_ALWAYS, "gelu"), (TANH_GELU, "tanh"), (TWICE, "twice"))}
        torch_name = ACTIVATIONS[activation].__name__
        compare_outputs(_outputs(module, learner, *spec),
                        _outputs(module, _torch_ffn(module, activation), *spec),
                        f"FeedForward(activation='{activation}')", where,
                        against=f"nn.Linear, nn.{torch_name}(), nn.Linear with the same weights",
                        variants=variants)
    expect_dropout_modes("FeedForward", lambda p: FeedForward(8, 32, activation="gelu", dropout=p),
                         seeded(2, 50, 8, seed=898),
                         lambda where, fn, *args: call_learner("FeedForward", where, fn, *args))
    probe, x = call_learner("FeedForward", "FeedForward(8, 16)", FeedForward, 8, 16), torch.ones(2, 3, 8)
    check_unplaced_tensors("FeedForward", lambda: probe(x))
    passed("FeedForward has the right layers, both activations, dropout, and rejects unknown activations.")
