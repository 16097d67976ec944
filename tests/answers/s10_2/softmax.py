"""softmax: right answers written differently, and planted bugs."""

import torch

from course.checking import pieces
from course.visible.s10_2.softmax import GLOBAL, LAST_AXIS, OTHER_DTYPE
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "softmax"


def softmax_logsumexp(x, dim=-1):
    return (x - x.logsumexp(dim, keepdim=True)).exp()


def softmax_max_values(x, dim=-1):
    e = torch.exp(x - torch.max(x, dim=dim, keepdim=True).values)
    return e / torch.sum(e, dim=dim, keepdim=True)


def softmax_naive(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim, keepdim=True)


def softmax_last_axis(x, dim=-1):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def softmax_global_max(x, dim=-1):
    """One maximum for the whole tensor, the sums along dim: 0/0 for slices far below it."""
    e = (x - x.max()).exp()
    return e / e.sum(dim, keepdim=True)


def softmax_global(x, dim=-1):
    e = (x - x.max()).exp()
    return e / e.sum()


def softmax_torch(x, dim=-1):
    return torch.softmax(x, dim)


def softmax_method(x, dim=-1):
    return x.softmax(dim)


def softmax_no_keepdim(x, dim=-1):
    e = (x - x.amax(dim)).exp()
    return e / e.sum(dim)


def softmax_dim1(x, dim=-1):
    """The axis fixed to 1."""
    e = (x - x.amax(1, keepdim=True)).exp()
    return e / e.sum(1, keepdim=True)


def softmax_unsqueeze_last(x, dim=-1):
    """keepdim replaced by unsqueeze(-1): right only for the last axis."""
    e = (x - x.max(dim).values.unsqueeze(-1)).exp()
    return e / e.sum(dim).unsqueeze(-1)


def softmax_in_float64(x, dim=-1):
    """Computed in float64 for accuracy, and returned so: float32 logits give float64 probabilities."""
    x = x.double()
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def softmax_float64_cast_back(x, dim=-1):
    """Computed in float64, cast back to the dtype of x: right."""
    return softmax_in_float64(x, dim).to(x.dtype)


def softmax_on_the_cpu(x, dim=-1):
    """Right on the CPU; a tensor made with device="cpu" by name, which only the run on 'meta' sees."""
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True) + torch.zeros(1, dtype=x.dtype, device="cpu")


def answers(solution):
    return [
        right("solution", solution["softmax"]),
        right("softmax_logsumexp", softmax_logsumexp),
        right("softmax_max_values", softmax_max_values),
        right("computed in float64, cast back", softmax_float64_cast_back),
        bug("computed and returned in float64", softmax_in_float64, hidden="returns torch.float64 for x of "
            "torch.float32", mistake=OTHER_DTYPE),
        bug("softmax_naive", softmax_naive, hidden="inf or NaN.*subtract the maximum"),
        bug("softmax_last_axis", softmax_last_axis, hidden="last axis whatever dim", mistake=LAST_AXIS),
        bug("softmax_global_max", softmax_global_max, hidden=r"underflowed to 0.*each slice's own maximum"),
        bug("softmax_global", softmax_global, hidden="differs", mistake=GLOBAL),
        bug("softmax_torch", softmax_torch, hidden="No credit.*torch.softmax"),
        bug("softmax_method", softmax_method, hidden="No credit.*Tensor.softmax"),
        bug("softmax_no_keepdim", softmax_no_keepdim, hidden="raised RuntimeError|differs"),
        bug("softmax_dim1", softmax_dim1),
        bug("softmax_unsqueeze_last", softmax_unsqueeze_last),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["softmax"]),
            hidden=ON_A_FIXED_DEVICE),
        bug("zeros made with device='cpu'", softmax_on_the_cpu, hidden=ON_A_FIXED_DEVICE),
        bug("the softmax the checks stand in for it", pieces.softmax, hidden="No credit.*own checking code"),
    ]
