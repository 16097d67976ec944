"""``RMSNorm(d_model, eps=1e-6)``: the exercise (inputs, reference, known mistakes, visible cases) and
its visible check."""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
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
from course.checking.blocks import rms_norm
from course.checking.compare import float32_inside
from course.checking.forbidden import RMS_NORM
from course.checking.modules import load_parameters

HOW = ("RMSNorm has exactly one parameter, weight, of shape (d_model,) and starting at ones (nn.RMSNorm's "
       "gain), and keeps the eps it is given for forward.")
WHERE = "Look at how forward turns the mean square of each vector into the divisor."
LAYER_NORM = Mistake("layer_norm", "LayerNorm: the mean taken out and x divided by its standard deviation",
                     "RMSNorm does not centre x: it divides x itself by the root of its mean square "
                     "(plus eps), then scales by the weight.")
EPS_OUTSIDE = Mistake("eps_outside_sqrt", "eps added outside the square root (x / (rms + eps))",
                      "eps belongs under the root: it is added to the mean square. " + WHERE)
NO_EPS = Mistake("no_eps", "no eps at all (x-transformers' RMSNorm: F.normalize(x) * sqrt(d_model), "
                 "which only keeps the norm from being 0)",
                 "Add eps to the mean square under the root: with small x (or a large eps) it matters. "
                 + WHERE)
NO_SQRT = Mistake("no_sqrt", "x divided by its mean square instead of its root mean square",
                  "The divisor is the square root of (mean square + eps). " + WHERE)
SUM_SQUARES = Mistake("sum_of_squares", "the sum of squares used instead of their mean",
                      "Average the squares over the last dimension (divide their sum by d_model). " + WHERE)
MEAN_OVER_ALL = Mistake("mean_over_all", "the mean square taken over the whole tensor, not over each vector",
                        "Each vector gets its own mean square: reduce over the last dimension only, keeping "
                        "it so that it broadcasts against x.")
FLOAT32_INSIDE = Mistake(
    "float32_inside", "RMSNorm computed in float32 and cast back to the dtype of x (as Llama's reference "
    "code does for half-precision inputs): a float64 x comes out with float32's precision",
    "Compute in the dtype of x, or at least in float32: a float64 x must not pass through float32 inside "
    "forward (look for .float(), .to(torch.float32) or a float32 constant).")
FLOAT32_RESULT = Mistake(
    "float32_result", "the result left in float32 for a half-precision x (computed in float32 and never "
    "cast back)",
    "RMSNorm returns the dtype of x: computing in float32 inside is fine for a bfloat16 or float16 x, but "
    "cast the normalised x back to the dtype of x before the weight scales it.")
NO_WEIGHT = Mistake("weight_unused", "the weight never applied",
                    "The last step scales each feature by self.weight.")
#: Half-precision dtypes: "the dtype of x" holds for them too, with the tolerance their 8 or 11 bits need.
HALF = (torch.bfloat16, torch.float16)
#: (rtol, atol as a share of the largest expected entry) per half dtype: a right answer computed in that
#: dtype throughout is off by up to 2 of its units in the last place (measured: 1.5e-2 in bfloat16, 2.5e-3
#: in float16, gradients included), one computed in float32 and cast back by 1.
HALF_TOLERANCE = {torch.bfloat16: 5e-2, torch.float16: 1e-2}


def norm_case(name: str, seed: int, shape: tuple, eps: float | None = None,
              dtype: torch.dtype = torch.float64, scale: float = 1.0) -> Case:
    """A case: x of ``shape`` drawn at ``scale``, eps (None: the default); its kind: a half-precision x
    (bfloat16, float16), small x (eps matters), large x, d_model=1, or else the rank of x."""
    kind = (f"{str(dtype).removeprefix('torch.')} x" if dtype in HALF else "small x" if scale < 0.1
            else "large x" if scale > 10 else "d_model=1" if shape[-1] == 1 else f"{len(shape)}-D x")
    return Case(name, seed, {"shape": shape, "eps": eps, "scale": scale}, dtype, kind=kind)


CASES = [
    norm_case("x (2, 3, 8), float32", 0, (2, 3, 8), dtype=torch.float32),
    norm_case("x (2, 2, 3, 8), eps=0.1, float64", 1, (2, 2, 3, 8), 0.1),
    norm_case("small x (about 1e-3), the default eps, float64", 2, (3, 8), scale=1e-3),
    norm_case("x (5, 6), float64", 3, (5, 6)),
    norm_case("large x (about 100), float64", 4, (3, 7), scale=100.0),
    norm_case("d_model=1, eps=1e-3, float64", 5, (4, 1), 1e-3),
    norm_case("x (2, 3, 8), bfloat16", 6, (2, 3, 8), dtype=torch.bfloat16),
    norm_case("x (3, 16), eps=1e-5, float16", 7, (3, 16), 1e-5, torch.float16),
]


def runs_in(dtype: torch.dtype) -> bool:
    """Can this torch compute an RMSNorm, gradients included, in ``dtype`` on the CPU? (float16 on the CPU
    came late to some torch versions: a case this torch cannot run is left out, on both sides.)"""
    if dtype not in HALF:
        return True
    try:
        x = torch.ones(2, 3, dtype=dtype, requires_grad=True)
        (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * x).sum().backward()
    except (RuntimeError, TypeError):
        return False
    return True


def inputs(case: Case, device) -> tuple[torch.Tensor, torch.Tensor]:
    """A case's x and the seeded weight (about 1) the module and nn.RMSNorm both get."""
    p, g = case.params, generator(case.seed)
    x = randn(p["shape"], g, case.dtype, device, p["scale"])
    weight = randn(p["shape"][-1:], g, case.dtype, device, 0.5) + 1
    return x, weight


def eps_of(case: Case) -> float:
    return 1e-6 if case.params["eps"] is None else case.params["eps"]


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
    NO_EPS: lambda x, w, eps: _rms(x, w, 0.0),
    SUM_SQUARES: lambda x, w, eps: _rms(x, w, eps, "sum"),
    NO_WEIGHT: lambda x, w, eps: _rms(x, w, eps, "no weight"),
    MEAN_OVER_ALL: lambda x, w, eps: _rms(x, w, eps, "all"),
}


def expect_not_shipped(module: nn.Module, exercise: str) -> None:
    """No credit for a module built on the checks' own stand-ins (LlamaBlock's check puts nn.RMSNorm's
    function and the SwiGLU reference in place of the learner's parts): they hold the reference."""
    shipped = [cls.__name__ for cls in type(module).__mro__
               if cls.__module__.startswith(("course.checking", "course.visible", "grader."))]
    if shipped:
        raise CheckFailure(f"No credit for {exercise}: it is built on {shipped[0]}, the course's own "
                           "checking code, which holds the reference it is graded against. Write it "
                           "yourself.")


def expect_layout(module: nn.Module, d_model: int) -> None:
    """One parameter, weight (d_model,), starting at ones."""
    params = dict(module.named_parameters())
    if set(params) != {"weight"}:
        raise CheckFailure(f"RMSNorm should have exactly one parameter, weight, but has "
                           f"{', '.join(sorted(params)) or 'none'}. {HOW}")
    weight = params["weight"]
    if tuple(weight.shape) != (d_model,):
        raise CheckFailure(f"RMSNorm({d_model}).weight should start as ones of shape ({d_model},), as "
                           f"nn.RMSNorm's; it has shape {tuple(weight.shape)}. {HOW}")
    if not bool((weight == 1).all()):
        other = float(weight[weight != 1][0])
        start = "zeros" if not bool(weight.any()) else f"values other than 1 (such as {other:.3g})"
        raise CheckFailure(f"RMSNorm({d_model}).weight should start as ones, as nn.RMSNorm's; it starts as "
                           f"{start}. {HOW}")


def expect_close_in_half(got, want, where: str) -> None:
    """A half-precision case against the reference rounded to that dtype, each output within the
    tolerance of its dtype (the formula's mistakes show on the float64 cases: none is named here)."""
    share = HALF_TOLERANCE[want["output"].dtype]
    for key, expected in want.items():
        scale = float(expected.detach().double().abs().max()) if expected.numel() else 0.0
        compare_outputs({key: got[key]}, {key: expected}, "RMSNorm", where, against="nn.RMSNorm",
                        atol=share * scale, rtol=share)


def outputs(norm, weight, x, seed):
    """``norm(x)`` with the gradients of x and the weight (fresh leaves)."""
    x = x.detach().clone().requires_grad_()
    return with_gradients(lambda: (norm(x),), ("output",), {"x": x, "weight": weight}, seed)


def _variant(f):
    def run(case, device):
        x, weight = inputs(case, device)
        w = weight.requires_grad_()
        return outputs(lambda t: f(t, w, eps_of(case)), w, x, case.seed)
    return run


#: A float64 result off by at most this share of its largest entry was computed in float32: float32
#: rounding is about 1e-7 of it, an eps of 1e-5 instead of 1e-6 already 1e-5.
FLOAT32_LEVEL = 1e-6


def expect_full_precision(got, want, where: str, variants) -> None:
    """On a float64 case, a result off by float32 rounding only, and like no other known mistake:
    computed in float32 inside."""
    if not float32_inside(got, want, FLOAT32_LEVEL):
        return
    rtol, atol = tolerance(torch.float64)
    off = [k for k, w in want.items() if not close(got[k], w, rtol, atol)]
    if diagnose(got, off[0], variants, rtol, atol) is None:
        raise CheckFailure(f"RMSNorm differs from nn.RMSNorm in {where} by float32 rounding only (x is "
                           f"float64).\n{FLOAT32_INSIDE.sentence()}", FLOAT32_INSIDE)


class RMSNormModule(Exercise):
    forbidden = RMS_NORM
    name = "RMSNorm"
    reference_name = "nn.RMSNorm with the same weight"
    mistakes = {m: _variant(f) for m, f in VARIANTS.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        d = case.params["shape"][-1]
        args = (d,) if case.params["eps"] is None else (d, case.params["eps"])
        module = self.build(impl, case, *args)
        expect_not_shipped(module, self.name)
        expect_layout(module, d)
        x, weight = inputs(case, device)
        params = load_parameters(module.to(device), {"weight": weight}, self.name, HOW)

        def forward(t):
            out = expect_tensor(self.call(case, module, t), "RMSNorm.forward", str(case))
            if out.dtype != t.dtype:
                message = (f"RMSNorm.forward returns {out.dtype} for x of {t.dtype} in {case}: it returns "
                           "the dtype of x")
                if out.dtype == torch.float32 and t.dtype in HALF:
                    raise CheckFailure(f"{message}.\n{FLOAT32_RESULT.sentence()}", FLOAT32_RESULT)
                raise CheckFailure(f"{message} (look for .float() or torch.tensor(...) inside forward).")
            return out

        return outputs(forward, params["weight"], x, case.seed)

    def cases(self):
        return [case for case in self.visible_cases if runs_in(case.dtype)]

    def reference(self, case, device):
        """nn.RMSNorm's function; for a half-precision x computed in float32 and rounded to the dtype of x
        (the most accurate value that dtype holds)."""
        x, weight = inputs(case, device)
        weight.requires_grad_()
        if case.dtype in HALF:
            return outputs(lambda t: rms_norm(t.float(), weight.float(), eps_of(case)).to(t.dtype), weight, x,
                           case.seed)
        return outputs(lambda t: rms_norm(t, weight, eps_of(case)), weight, x, case.seed)

    def evaluate(self, case, got, device):
        if case.dtype in HALF:
            expect_close_in_half(got, self.expected(case, device), str(case))
            return
        variants = {m: partial(run, case, device) for m, run in self.mistakes.items()}
        expect_full_precision(got, self.expected(case, device), str(case), variants)
        super().evaluate(case, got, device)


@visible_check
def check_RMSNorm(RMSNorm) -> None:
    """Layout, then output and gradients against nn.RMSNorm with copied weights."""
    RMSNormModule().run_cases(RMSNorm)
    passed("RMSNorm matches nn.RMSNorm with the same weight on 2-D, 3-D and 4-D inputs, small and large, "
           "gradients too, and returns the dtype of x (bfloat16 and float16 too).")
