"""Visible check of ``RMSNorm(d_model, eps=1e-6)``, and its known mistakes."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    close,
    compare_outputs,
    diagnose,
    expect_tensor,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
    with_gradients,
)

HOW = "Create one parameter, self.weight = nn.Parameter(torch.ones(d_model)), and keep eps."
FORMULA = "x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight."
LAYER_NORM = Mistake("layer_norm", "LayerNorm: the mean taken out and x divided by its standard deviation",
                     "RMSNorm does not centre x: divide x by its root mean square, " + FORMULA)
EPS_OUTSIDE = Mistake("eps_outside_sqrt", "eps added outside the square root (x / (rms + eps))",
                      "Add eps to the mean square, then take the root: " + FORMULA)
NO_SQRT = Mistake("no_sqrt", "x divided by its mean square instead of its root mean square",
                  "Take the square root of the mean square: " + FORMULA)
SUM_SQUARES = Mistake("sum_of_squares", "the sum of squares used instead of their mean",
                      "Average the squares over the last dimension: " + FORMULA)
MEAN_OVER_ALL = Mistake("mean_over_all", "the mean square taken over the whole tensor, not over each vector",
                        "Average over the last dimension only: x.pow(2).mean(dim=-1, keepdim=True).")
FLOAT32_INSIDE = Mistake(
    "float32_inside", "RMSNorm computed in float32 and cast back to the dtype of x (as Llama's reference "
    "code does for half-precision inputs): a float64 x comes out with float32's precision",
    "Compute in the dtype of x: no .float(), .to(torch.float32) or float32 constant inside forward.")
NO_WEIGHT = Mistake("weight_unused", "the weight never applied",
                    "Multiply by self.weight at the end: " + FORMULA)

CASES = [  # name, shape of x, eps (None: the default), dtype, scale of x
    ("x (2, 3, 8), float32", (2, 3, 8), None, torch.float32, 1.0),
    ("x (2, 2, 3, 8), eps=0.1, float64", (2, 2, 3, 8), 0.1, torch.float64, 1.0),
    ("small x (about 1e-3), the default eps, float64", (3, 8), None, torch.float64, 1e-3),
]


def _rms(x, weight, eps, kind="ok"):
    square = (x.pow(2).sum(-1, keepdim=True) if kind == "sum" else x.pow(2).mean() if kind == "all"
              else x.pow(2).mean(-1, keepdim=True))
    if kind == "eps outside":
        return x / (square.sqrt() + eps) * weight
    if kind == "no sqrt":
        return x / (square + eps) * weight
    return x * torch.rsqrt(square + eps) * (1 if kind == "no weight" else weight)


VARIANTS = {
    LAYER_NORM: lambda x, w, eps: F.layer_norm(x, (x.shape[-1],), w, None, eps),
    EPS_OUTSIDE: lambda x, w, eps: _rms(x, w, eps, "eps outside"),
    NO_SQRT: lambda x, w, eps: _rms(x, w, eps, "no sqrt"),
    SUM_SQUARES: lambda x, w, eps: _rms(x, w, eps, "sum"),
    NO_WEIGHT: lambda x, w, eps: _rms(x, w, eps, "no weight"),
    MEAN_OVER_ALL: lambda x, w, eps: _rms(x, w, eps, "all"),
}


def expect_layout(module, d_model: int) -> None:
    """An nn.Module with one parameter, weight (d_model,), starting at ones."""
    if not isinstance(module, nn.Module):
        raise CheckFailure(f"RMSNorm(...) should create an nn.Module, not a {type(module).__name__}.")
    params = dict(module.named_parameters())
    if set(params) != {"weight"}:
        raise CheckFailure(f"RMSNorm should have exactly one parameter, weight, but has "
                           f"{', '.join(sorted(params)) or 'none'}. {HOW}")
    weight = params["weight"]
    if tuple(weight.shape) != (d_model,) or not bool((weight == 1).all()):
        raise CheckFailure(f"RMSNorm({d_model}).weight should start as ones of shape ({d_model},), as "
                           f"nn.RMSNorm's; it has shape {tuple(weight.shape)}. {HOW}")


def outputs(norm, weight, x, seed):
    """``norm(x)`` with the gradients of x and the weight (fresh leaves)."""
    x = x.detach().clone().requires_grad_()
    return with_gradients(lambda: (norm(x),), ("output",), {"x": x, "weight": weight}, seed)


def reference_norm(d_model, eps, weight):
    """nn.RMSNorm holding ``weight``."""
    norm = nn.RMSNorm(d_model, eps=eps).to(weight.device, weight.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
    return norm


def learner_forward(module, where: str):
    def forward(x):
        out = expect_tensor(call_learner("RMSNorm.forward", where, module, x), "RMSNorm.forward", where)
        if out.dtype != x.dtype:
            raise CheckFailure(f"RMSNorm.forward returns {out.dtype} for x of {x.dtype} in {where}: keep the "
                               "dtype of x (no .float() or torch.tensor(...) inside).")
        return out
    return forward


#: A float64 result off by at most this share of its largest entry was computed in float32: float32
#: rounding is about 1e-7 of it, an eps of 1e-5 instead of 1e-6 already 1e-5.
FLOAT32_LEVEL = 1e-6


def expect_full_precision(got, want, where: str, variants) -> None:
    """On a float64 case, a result off by float32 rounding only, and like no other known mistake:
    computed in float32 inside."""
    if want["output"].dtype != torch.float64:
        return
    rtol, atol = tolerance(torch.float64)
    off = [k for k, w in want.items() if not close(got[k], w, rtol, atol)]
    if not off or diagnose(got, off[0], variants, rtol, atol) is not None:
        return
    if all((got[k] - w).abs().max() <= FLOAT32_LEVEL * w.abs().max() for k, w in want.items()):
        raise CheckFailure(f"RMSNorm differs from nn.RMSNorm in {where} by float32 rounding only (x is "
                           f"float64).\n{FLOAT32_INSIDE.sentence()}", FLOAT32_INSIDE)


def compare_norm(module, x, eps, where, seed, device=None) -> None:
    """The learner's module (its weight seeded) against nn.RMSNorm with the same weight, and the variants."""
    d = x.shape[-1]
    weight = dict(module.named_parameters())["weight"]
    with torch.no_grad():
        weight.copy_(randn((d,), generator(seed + 31), x.dtype, x.device, 0.5) + 1)
    reference = reference_norm(d, eps, weight.detach())
    module.zero_grad()
    got = outputs(learner_forward(module, where), weight, x, seed)
    want = outputs(reference, reference.weight, x, seed)
    w = weight.detach().clone().requires_grad_()
    variants = {m: (lambda f=f: outputs(lambda t: f(t, w, eps), w, x, seed)) for m, f in VARIANTS.items()}
    expect_full_precision(got, want, where, variants)
    compare_outputs(got, want, "RMSNorm", where, against="nn.RMSNorm with the same weight", variants=variants,
                    device=device)


@visible_check
def check_RMSNorm(RMSNorm) -> None:
    """Layout, then output and gradients against nn.RMSNorm with copied weights."""
    for seed, (case, shape, eps, dtype, scale) in enumerate(CASES):
        where = f"case '{case}'"
        d = shape[-1]
        args = (d,) if eps is None else (d, eps)
        module = call_learner("RMSNorm", f"RMSNorm{args}", RMSNorm, *args)
        expect_layout(module, d)
        x = randn(shape, generator(seed), dtype, "cpu", scale)
        compare_norm(module.to(dtype), x, 1e-6 if eps is None else eps, where, seed)
    passed("RMSNorm matches nn.RMSNorm with the same weight on 2-D, 3-D and 4-D inputs, gradients too.")
