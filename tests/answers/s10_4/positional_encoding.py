"""PositionalEncoding: right answers written differently, and planted bugs."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_4.positional_encoding import SCALED
from course.visible.s10_4.sinusoidal_positional_encoding import FROM_ONE
from tests.answers import ON_A_FIXED_DEVICE, bug, right
from tests.answers.s10_4.sinusoidal_positional_encoding import pe_float32

EXERCISE = "PositionalEncoding"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'the formula in float64: arithmetic, as right answers compute it'

class PEFromLoop(nn.Module):
    """A right answer: the table from its own loop, size(1) and unsqueeze, F.dropout."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.register_buffer("pe", pe_float32(max_len, d_model))

    def forward(self, x):
        if x.size(1) > len(self.pe):
            raise ValueError("too long")
        return F.dropout(x + self.pe[: x.size(1)].unsqueeze(0), self.p, self.training)


class PEBase(nn.Module):
    """A right module that planted bugs below change one piece of."""

    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe_float32(max_len, d_model))

    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe[:n])


class PEPlainAttribute(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.pe = pe_float32(max_len, d_model)


class PEParameter(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.pe = nn.Parameter(pe_float32(max_len, d_model), requires_grad=False)


class PENotPersistent(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        del self.pe
        self.register_buffer("pe", pe_float32(max_len, d_model), persistent=False)


class PEThreeD(nn.Module):  # the Annotated Transformer's (1, max_len, d_model) buffer
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", pe_float32(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, : x.size(1)])


class PENoLengthCheck(PEBase):
    def forward(self, x):
        return self.dropout(x + self.pe[: x.shape[1]])


class PEScaled(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x * math.sqrt(x.shape[-1]) + self.pe[:n])


class PEFromOne(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0] - 1:
            raise ValueError("too long")
        return self.dropout(x + self.pe[1 : n + 1])


class PEDropoutOnPE(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return x + self.dropout(self.pe[:n])


class PEAlwaysDropout(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, max_len, dropout)
        self.p = dropout

    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return F.dropout(x + self.pe[:n], self.p, training=True)


class PEFixedDevice(PEBase):
    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        out = torch.zeros(x.shape, dtype=x.dtype)  # on the CPU, whatever x's device
        return self.dropout(out + x + self.pe[:n])


class IgnoresMaxLen(PEBase):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__(d_model, 5000, dropout)


class SlicesMaxLen(PEBase):
    def forward(self, x):
        if x.shape[1] > self.pe.shape[0]:
            raise ValueError("too long")
        return self.dropout(x + self.pe[: x.shape[1]].flip(0))


class PENoDropout(PEBase):
    """The dropout argument accepted and never used."""

    def forward(self, x):
        n = x.shape[1]
        if n > self.pe.shape[0]:
            raise ValueError("too long")
        return x + self.pe[:n]


def answers(solution):
    return [
        right("solution", solution["PositionalEncoding"]),
        right("PEFromLoop", PEFromLoop),
        right("PEBase", PEBase),
        bug("PEPlainAttribute", PEPlainAttribute, hidden="no registered buffer called pe"),
        bug("PEParameter", PEParameter, hidden="nn.Parameter"),
        bug("PENotPersistent", PENotPersistent, hidden="persistent"),
        bug("PEThreeD", PEThreeD, hidden=r"shape \(max_len, d_model\)"),
        bug("PENoLengthCheck", PENoLengthCheck,
            hidden="should raise ValueError when x has n=7 positions but max_len=6"),
        bug("PEScaled", PEScaled, hidden=r"sqrt\(d_model\)", mistake=SCALED),
        bug("PEFromOne", PEFromOne, hidden="positions counted from 1", mistake=FROM_ONE),
        bug("PENoDropout", PENoDropout, hidden=r"no dropout at all"),
        bug("PEDropoutOnPE", PEDropoutOnPE, hidden="dropout to the sum"),
        bug("PEAlwaysDropout", PEAlwaysDropout, hidden=r"eval\(\) mode"),
        bug("PEFixedDevice", PEFixedDevice, hidden=ON_A_FIXED_DEVICE),
        bug("max_len ignored", IgnoresMaxLen),
        bug("pe read backwards", SlicesMaxLen),
    ]
