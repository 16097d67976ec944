"""SwiGLU: right answers written differently, and planted bugs."""

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_7.swiglu import (
    GATE_ON_UP,
    GELU_GATE,
    NO_GATE,
    RELU_GATE,
    SIGMOID_GATE,
    SILU_OF_PRODUCT,
)
from tests.answers import bug, right

EXERCISE = "SwiGLU"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


class Base(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)


class SigmoidWritten(Base):
    """SiLU written out as g * sigmoid(g)."""

    def forward(self, x):
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))


class Einsum(Base):
    """The three projections as einsums with the weights."""

    def forward(self, x):
        gate = torch.einsum("...d,fd->...f", x, self.w1.weight)
        up = torch.einsum("...d,fd->...f", x, self.w3.weight)
        return torch.einsum("...f,df->...d", nn.SiLU()(gate) * up, self.w2.weight)


def _with(hidden):
    return type("Planted", (Base,), {"forward": lambda self, x: self.w2(hidden(self.w1(x), self.w3(x)))})


class WithBias(Base):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class GateUpDown(nn.Module):
    """The layers created gate, up, down (w1, w3, w2): another order of random numbers."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class FixedDevice(Base):
    def forward(self, x):
        scale = torch.ones(self.w1.out_features, dtype=x.dtype)  # on the CPU whatever x's device
        return self.w2(F.silu(self.w1(x)) * self.w3(x) * scale)


def answers(solution):
    return [
        right("solution", solution["SwiGLU"]),
        right("SiLU as g * sigmoid(g)", SigmoidWritten),
        right("einsums and nn.SiLU", Einsum),
        bug("SiLU on the up branch (w1, w3 swapped)", _with(lambda a, b: a * F.silu(b)), hidden="differs",
            mistake=GATE_ON_UP),
        bug("sigmoid gate (GLU)", _with(lambda a, b: torch.sigmoid(a) * b), mistake=SIGMOID_GATE),
        bug("GELU gate", _with(lambda a, b: F.gelu(a) * b), mistake=GELU_GATE),
        bug("ReLU gate", _with(lambda a, b: F.relu(a) * b), mistake=RELU_GATE),
        bug("SiLU of the product", _with(lambda a, b: F.silu(a * b)), mistake=SILU_OF_PRODUCT),
        bug("no gate, w3 unused", _with(lambda a, b: F.silu(a)), mistake=NO_GATE),
        bug("w2 with a bias", WithBias, hidden="should not have a bias"),
        bug("created w1, w3, w2", GateUpDown, hidden="order"),
        bug("scale on a fixed device", FixedDevice, hidden="without a device"),
    ]
