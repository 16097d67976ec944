"""FeedForward: right answers written differently, and planted bugs."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.checking.blocks import UNSCALED_DROPOUT
from course.visible.s10_5.feed_forward import GELU_ALWAYS, NO_ACTIVATION, RELU_ALWAYS, TANH_GELU, TWICE
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "FeedForward"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


class FFNBase(nn.Module):
    """A right answer written without nn.Sequential or activation modules; planted bugs change one piece."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = activation
        self.p = dropout

    def phi(self, h):
        return h.clamp(min=0) if self.activation == "relu" else F.gelu(h)

    def forward(self, x):
        return self.linear2(F.dropout(self.phi(self.linear1(x)), self.p, self.training))


class FFNErfGelu(FFNBase):
    """A right answer: GELU written out with erf."""

    def phi(self, h):
        if self.activation == "relu":
            return torch.relu(h)
        return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


class FFNSequential(nn.Module):
    """A right answer with the activation chosen from a dict of modules and dropout after it."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.act = {"relu": nn.ReLU, "gelu": nn.GELU}[activation]() if activation in ("relu", "gelu") \
            else None
        if self.act is None:
            raise ValueError(f"unknown activation {activation}")
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.drop(self.act(self.linear1(x))))



class FFNHandDropout(FFNBase):
    """A right answer: dropout written by hand, what it keeps divided by 1 - p."""

    def forward(self, x):
        h = self.phi(self.linear1(x))
        if self.training and self.p:
            h = h * (torch.rand_like(h) >= self.p) / (1 - self.p)
        return self.linear2(h)


class FFNUnscaledDropout(FFNBase):
    """Dropout written by hand: entries zeroed with probability p, the kept ones not divided by 1 - p."""

    def forward(self, x):
        h = self.phi(self.linear1(x))
        return self.linear2(h * (torch.rand_like(h) >= self.p) if self.training else h)


class FFNNoActivation(FFNBase):
    def phi(self, h):
        return h


class FFNAlwaysRelu(FFNBase):
    def phi(self, h):
        return F.relu(h)


class FFNTanhGelu(FFNBase):
    def phi(self, h):
        return F.relu(h) if self.activation == "relu" else F.gelu(h, approximate="tanh")


class FFNActivationTwice(FFNBase):
    def forward(self, x):
        return self.phi(super().forward(x))


class FFNNoValueError(FFNBase):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__(d_model, d_ff, "gelu" if activation == "gelu" else "relu", dropout)


class FFNDropoutAlwaysOn(FFNBase):
    def forward(self, x):
        return self.linear2(F.dropout(self.phi(self.linear1(x)), self.p, training=True))


class FFNDropoutIgnored(FFNBase):
    def forward(self, x):
        return self.linear2(self.phi(self.linear1(x)))


class FFNOtherNames(nn.Module):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class FFNNoBias(FFNBase):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__(d_model, d_ff, activation, dropout)
        self.linear1 = nn.Linear(d_model, d_ff, bias=False)
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)



class FFNAlwaysGelu(FFNBase):
    def phi(self, h):
        return F.gelu(h)


def answers(solution):
    return [
        right("solution", solution["FeedForward"]),
        right("FFNBase", FFNBase),
        right("FFNErfGelu", FFNErfGelu),
        right("FFNSequential", FFNSequential),
        right("dropout written by hand, scaled", FFNHandDropout),
        bug("dropout written by hand, unscaled", FFNUnscaledDropout, hidden=r"dropout=0\.\d+ in train",
            mistake=UNSCALED_DROPOUT),
        bug("FFNNoActivation", FFNNoActivation, hidden="without its activation", mistake=NO_ACTIVATION),
        bug("FFNAlwaysRelu", FFNAlwaysRelu, hidden="ReLU used although activation='gelu'",
            mistake=RELU_ALWAYS),
        bug("FFNTanhGelu", FFNTanhGelu, hidden="tanh approximation of GELU", mistake=TANH_GELU),
        bug("FFNActivationTwice", FFNActivationTwice, hidden="activation after linear2", mistake=TWICE),
        bug("FFNNoValueError", FFNNoValueError, hidden="should raise ValueError for activation='tanh'"),
        bug("FFNDropoutAlwaysOn", FFNDropoutAlwaysOn, hidden=r"eval\(\) mode"),
        bug("FFNDropoutIgnored", FFNDropoutIgnored, hidden=r"train\(\) mode"),
        bug("FFNOtherNames", FFNOtherNames, hidden="needs an nn.Linear called linear1"),
        bug("FFNNoBias", FFNNoBias, hidden="linear1 should have a bias"),
        bug("gelu although activation='relu'", FFNAlwaysGelu, mistake=GELU_ALWAYS),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["FeedForward"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
