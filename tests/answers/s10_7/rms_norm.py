"""RMSNorm: right answers written differently, and planted bugs."""

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_7.rms_norm import (
    EPS_OUTSIDE,
    FLOAT32_INSIDE,
    FLOAT32_RESULT,
    LAYER_NORM,
    MEAN_OVER_ALL,
    NO_EPS,
    NO_SQRT,
    NO_WEIGHT,
    SUM_SQUARES,
)
from tests.answers import bug, right

EXERCISE = "RMSNorm"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'F.rms_norm runs as arithmetic on the CPU; the other normalisations are forbidden by family'


class Base(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))


class Divide(Base):
    """x divided by sqrt(mean square + eps)."""

    def forward(self, x):
        return self.weight * x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)


class XTransformers(Base):
    """x-transformers' RMSNorm: F.normalize (no eps under the root) times sqrt(d_model)."""

    def forward(self, x):
        return F.normalize(x, dim=-1) * x.shape[-1] ** 0.5 * self.weight


class FromNorm(Base):
    """The mean square from the vector norm: ||x||² / d."""

    def forward(self, x):
        mean_square = x.norm(dim=-1, keepdim=True) ** 2 / x.shape[-1]
        return x * (mean_square + self.eps) ** -0.5 * self.weight


class LayerNormLike(Base):
    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class EpsOutside(Base):
    def forward(self, x):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight


class NoSqrt(Base):
    def forward(self, x):
        return x / (x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SumOfSquares(Base):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + self.eps) * self.weight


class WeightUnused(Base):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class MeanOverEverything(Base):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean() + self.eps) * self.weight


class CallsRmsNorm(Base):
    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Mirrored(Base):
    """x / rms(x) as the first half of a normalisation of PyTorch's applied to [x, -x], which has mean 0 and
    the mean square of x as its variance: a right value, by the reference's door (``norm(y, eps)``)."""

    def norm(self, y):
        raise NotImplementedError

    def forward(self, x):
        d = x.shape[-1]
        y = torch.cat([x, -x], -1)  # (..., 2 d): mean 0, variance mean(x**2)
        return self.weight * self.norm(y)[..., :d]


class ByGroupNorm(Mirrored):
    def norm(self, y):  # one group: each row of (rows, 2 d) normalised
        return F.group_norm(y.reshape(-1, y.shape[-1]), 1, eps=self.eps).view_as(y)


class ByLayerNorm(Mirrored):
    def norm(self, y):
        return F.layer_norm(y, y.shape[-1:], eps=self.eps)


class WithBias(Divide):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        return super().forward(x) + self.bias


class RandomStart(Divide):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.randn(d_model))


class ZeroStart(Divide):
    def __init__(self, d_model, eps=1e-6):
        super().__init__(d_model, eps)
        self.weight = nn.Parameter(torch.zeros(d_model))


class InFloat32(Base):
    def forward(self, x):
        x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()


class Float32Inside(Base):
    """Llama's reference RMSNorm: the statistic in float32, the result cast back to the dtype of x."""

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class AtLeastFloat32(Base):
    """A right answer: computed in float32 at least (float64 stays float64), cast back to the dtype of x."""

    def forward(self, x):
        inside = x.to(torch.promote_types(x.dtype, torch.float32))
        normed = inside * torch.rsqrt(inside.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.weight


class HalfUpcastNotCastBack(Base):
    """A half-precision x computed in float32 (Hugging Face's way), the result never cast back."""

    def forward(self, x):
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class FixedDevice(Base):
    def forward(self, x):
        eps = torch.full((1,), self.eps, dtype=x.dtype)  # on the CPU whatever x's device
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.weight


def answers(solution):
    return [
        right("solution", solution["RMSNorm"]),
        right("RMSNormDivide", Divide),
        right("RMSNormFromNorm", FromNorm),
        right("at least float32 inside, cast back", AtLeastFloat32),
        bug("LayerNorm (mean removed)", LayerNormLike, hidden="differs", mistake=LAYER_NORM),
        bug("eps outside the sqrt", EpsOutside, mistake=EPS_OUTSIDE),
        bug("no sqrt", NoSqrt, mistake=NO_SQRT),
        bug("no eps (x-transformers')", XTransformers, mistake=NO_EPS),
        bug("sum of squares", SumOfSquares, mistake=SUM_SQUARES),
        bug("weight unused", WeightUnused, mistake=NO_WEIGHT),
        bug("mean over every dimension", MeanOverEverything, hidden="differs", mistake=MEAN_OVER_ALL),
        bug("calls F.rms_norm", CallsRmsNorm, hidden="No credit.*rms_norm"),
        bug("F.group_norm of one group of [x, -x]", ByGroupNorm, hidden="No credit.*group_norm"),
        bug("F.layer_norm of [x, -x]", ByLayerNorm, hidden="No credit.*layer_norm"),
        bug("with a bias", WithBias, hidden="bias"),
        bug("weight starts random", RandomStart, hidden="start as ones.*values other than 1"),
        bug("weight starts at zeros", ZeroStart, hidden="start as ones.*starts as zeros"),
        bug("computes in float32", InFloat32, hidden="dtype of x"),
        bug("float32 inside, cast back", Float32Inside, hidden="float32 rounding", mistake=FLOAT32_INSIDE),
        bug("half precision upcast, never cast back", HalfUpcastNotCastBack, hidden="bfloat16.*dtype of x",
            mistake=FLOAT32_RESULT),
        bug("eps on a fixed device", FixedDevice, hidden="without a device"),
    ]
