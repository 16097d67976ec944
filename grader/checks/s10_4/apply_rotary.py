"""Hidden check of ``apply_rotary`` (defined in its visible module): the visible comparisons (their
words), then against a product of complex numbers in float64, which only grading holds.

Pair i, ``a + ib = (x[..., 2i], x[..., 2i+1])``, turned by ``e^(i p omega_i)`` (``torch.polar``),
where the notebook uses sines and cosines; one case checks that the score of a rotated query and
key depends only on their offset.
"""

from __future__ import annotations

import torch

from course.checking import angle_tolerance, close, compare_outputs
from course.visible.s10_4.apply_rotary import (
    LENGTH,
    OFFSET,
    SWITCHES,
    ApplyRotary,
    rotary_case,
)
from grader.checks.exercise import GradedExercise, forward_backward, registered
from grader.checks.guarded_calls import Case, Outputs, generator, randn
from grader.checks.shared_references import F64

FORMULA = "pair (x[..., 2i], x[..., 2i+1]) turned counter-clockwise by p * base^(-2i/d)"
AGAINST = {"output": FORMULA, "rotated q": FORMULA, "grad x": "the gradient of the rotation",
           "scores": "the scores of the rotated query and key"}
#: Grading's own, after the visible cases re-seeded: other sizes, and the score property ("offset").
CASES = [
    rotary_case("2-D x (n=5, d=8)", 760, (5, 8), "2-D"),
    rotary_case("3-D x (B=2, n=6, d=4)", 761, (2, 6, 4), "3-D"),
    rotary_case("4-D x (B=2, h=3, n=5, d=6)", 762, (2, 3, 5, 6), "4-D"),
    rotary_case("float32, 4-D x (B=3, h=2, n=9, d=12)", 767, (3, 2, 9, 12), "4-D", torch.float32),
    rotary_case("offset: one query and one key at positions 0 .. 11", 768, (12, 8), "2-D", offset=True),
]


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float, *, halves: bool = False,
           direction: float = 1.0, exponent: float = 2.0, inverted: bool = False,
           swap: bool = False, added: bool = False, cat: bool = False) -> torch.Tensor:
    """Rotary embedding of float64 ``x`` (..., n, d) at float64 ``positions`` (n,), float64.

    The reference (every switch off) turns pair i by the angle ``p * base^(-2i/d)``: a product of
    complex numbers. The switches are known mistakes: ``halves`` pairs column i with column i + d/2;
    ``direction=-1`` turns clockwise; ``exponent``/``inverted`` other frequencies; ``swap`` exchanges
    the cosine and the sine; ``added`` adds the sinusoidal table instead of rotating; ``cat`` puts
    the turned pairs back as two halves.
    """
    d = x.shape[-1]
    pair = torch.arange(d // 2, dtype=F64, device=x.device)
    power = exponent * pair / d  # 2i/d, or a known mistake's i/d or 4i/d
    omega = torch.pow(torch.full_like(power, base), power if inverted else -power)
    angle = positions.to(F64)[:, None] * omega  # (n, d / 2)
    if added:
        return x + torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)
    if halves:
        first, second = x[..., : d // 2], x[..., d // 2:]
    else:
        first, second = x[..., 0::2], x[..., 1::2]
    if swap:  # cos and sin exchanged: (a sin - b cos, a cos + b sin)
        cos, sin = angle.sin(), angle.cos()
        a, b = first * cos - second * sin, first * sin + second * cos
    else:
        turned = torch.complex(first, second) * torch.polar(torch.ones_like(angle), direction * angle)
        a, b = turned.real, turned.imag
    if halves or cat:
        return torch.cat([a, b], dim=-1)
    return torch.stack([a, b], dim=-1).flatten(-2)  # a0' b0' a1' b1' ...


def _outputs(rotate, case: Case, device: torch.device) -> Outputs:
    """What ``rotate(x, positions)`` gives on ``case``: the output and its gradient, or the
    scores of the offset case."""
    x = randn(case.params["shape"], generator(case.seed), case.dtype, device)
    if "offset" in case.params:  # one query and one key, each placed at every position
        q, k = x[:1].repeat(len(x), 1), x[1:2].repeat(len(x), 1)  # (P, d)
        turned_q, turned_k = rotate(q, None).detach(), rotate(k, None).detach()
        return {"rotated q": turned_q, "scores": turned_q @ turned_k.T}  # scores[m, n]: q at m, k at n
    x.requires_grad_()
    given = case.params.get("positions")
    positions = None if given is None else torch.tensor(given, dtype=torch.long, device=device)
    return forward_backward(lambda: (rotate(x, positions),), ("output",), {"x": x}, case.seed)


def _mistake(*, start: int = 0, ignore_positions: bool = False, base=None, **switch):
    def run(case: Case, device: torch.device) -> Outputs:
        used = case.params.get("base", 10000.0) if base is None else base

        def rotate(x, positions):
            if positions is None or ignore_positions:
                positions = torch.arange(x.shape[-2], device=x.device)
            return rotary(x.to(F64), positions + start, used, **switch).to(x.dtype)

        return _outputs(rotate, case, device)
    return run


def _pair_lengths(t: torch.Tensor) -> torch.Tensor:
    return t[..., 0::2] ** 2 + t[..., 1::2] ** 2


def _broken_property(case: Case, got: Outputs, device) -> str | None:
    """A property the learner's outputs break, when no known mistake matches."""
    got = {k: v.detach().to(device, F64) for k, v in got.items()}
    if not all(torch.isfinite(v).all() for v in got.values()):
        return None
    x = randn(case.params["shape"], generator(case.seed), case.dtype, device).to(F64)
    turned = got.get("output", got.get("rotated q"))
    if "offset" in case.params:
        x = x[:1].repeat(len(x), 1)
    if turned is not None and turned.shape == x.shape and not close(
            _pair_lengths(turned), _pair_lengths(x), 1e-4, 1e-4):
        return LENGTH
    scores = got.get("scores")
    if scores is not None and scores.dim() == 2 and not close(scores[1:, 1:], scores[:-1, :-1], 1e-6, 1e-6):
        return OFFSET
    return None


@registered
class GradedApplyRotary(ApplyRotary, GradedExercise):
    reference_name = "the rotation evaluated in float64"
    mistakes = {mistake: _mistake(**switch) for mistake, switch in SWITCHES.items()}
    own_cases = CASES

    def run(self, impl, case, device):
        """The visible check's outputs (the rotated x, its gradient, the probes' images), or the scores."""
        if "offset" in case.params:
            return _outputs(lambda x, positions: self.rotate(impl, case, x, positions), case, device)
        return super().run(impl, case, device)

    def reference(self, case, device):
        return _mistake()(case, device)

    def evaluate(self, case, got, device):
        """The visible check's comparisons first (its words), then against the complex product."""
        if "offset" not in case.params:
            super().evaluate(case, got, device)
        expected = self.reference(case, device)
        positions = case.params.get("positions") or [case.params["shape"][-2] - 1]
        scale = 1.0 + max(float(v.abs().max()) for v in expected.values())
        atol = angle_tolerance(max(positions)) * scale * (4 if "offset" in case.params else 1)
        compare_outputs(got, expected, self.name, str(case), atol=atol, against=AGAINST,
                        variants={m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()},
                        hint=lambda key, have: _broken_property(case, {**got, key: have}, device))
