"""Visible check of ``apply_rotary(x, positions=None, base=10000.0)``, and its known mistakes.

The probes: a token (1, 0, 1, 0, ...) and a token (0, 1, 0, 1, ...) at every position must come
out as (cos, sin) and (-sin, cos) of p * base^(-2i/d), the formula entry by entry; any x is then
a combination of them pair by pair (a rotation is linear), and its gradient is turned back.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    angle_tolerance,
    close,
    compare_outputs,
    expect_shape,
    expect_tensor,
    expect_value_error,
    generator,
    passed,
    randn,
    seeded,
    visible_check,
    with_gradients,
)

HALVES = Mistake("halves", "pairs made of column i and column i + d/2 (the 'rotate_half' layout of some "
                 "libraries)", "This notebook pairs neighbouring columns, like the sinusoidal table: "
                 "(x[..., 2i], x[..., 2i+1]): every second feature from 0 with every second from 1.")
CLOCKWISE = Mistake("clockwise", "each pair turned clockwise (the signs of the sine terms swapped)",
                    "Counter-clockwise: (a, b) -> (a cos - b sin, a sin + b cos). On the stored columns "
                    "relative_shift_matrix(p, d) turns clockwise: apply_rotary at position p is "
                    "relative_shift_matrix(-p, d).")
EXPONENT_I = Mistake("exponent_i", "the exponent i/d instead of 2i/d (pair index without the 2)",
                     "Pair i turns by p * base^(-2i/d): 2i is the column of its first coordinate "
                     "(0, 2, 4, ...), not the pair index i.")
EXPONENT_4I = Mistake("exponent_4i", "the exponent 4i/d: the column index 2i doubled again",
                      "The even column indices 0, 2, 4, ... already are 2i: doubling them gives 4i.")
INVERTED = Mistake("inverted", "the frequency inverted: the angle p * base^(+2i/d)",
                   "Pair i turns by p / base^(2i/d): the first pair fastest, the last slowest.")
FROM_ONE = Mistake("from_one", "positions counted from 1 instead of 0", "Without positions, token j is at "
                   "position j = 0, 1, ..., n-1: the first token is not rotated at all.")
POSITIONS_IGNORED = Mistake("positions_ignored", "the positions argument ignored (always 0 .. n-1)",
                            "When positions is given, token j is at position positions[j].")
BASE_IGNORED = Mistake("base_ignored", "the base argument ignored (always 10000)",
                       "Use base in the frequencies: base^(-2i/d).")
SWAPPED = Mistake("swapped", "cosine and sine exchanged: (a sin - b cos, a cos + b sin)",
                  "The cosine multiplies the coordinate itself: (a cos - b sin, a sin + b cos).")
ADDED = Mistake("added", "the sinusoidal encoding added to x instead of rotating x", "Rotary embedding "
                "multiplies: each pair (a, b) becomes (a cos - b sin, a sin + b cos), so its length stays "
                "the same.")
CAT = Mistake("cat", "the turned pairs put back as two halves (every new a, then every new b) instead "
              "of in their own columns 2i and 2i+1", "Each turned pair goes back where it came from: "
              "new a in column 2i, new b in column 2i+1, pair after pair. Look at how you join the "
              "two results.")
#: The switches of :func:`probe_images` that reproduce each mistake.
SWITCHES = {HALVES: {"halves": True}, CLOCKWISE: {"direction": -1.0}, EXPONENT_I: {"exponent": 1.0},
            EXPONENT_4I: {"exponent": 4.0}, INVERTED: {"inverted": True}, FROM_ONE: {"start": 1},
            POSITIONS_IGNORED: {"ignore_positions": True}, BASE_IGNORED: {"base": 10000.0},
            SWAPPED: {"swap": True}, ADDED: {"added": True}, CAT: {"cat": True}}
LENGTH = ("The length of each pair (x[..., 2i], x[..., 2i+1]) should not change (a rotation), but it does: "
          "new a = a cos - b sin, new b = a sin + b cos, with the old a and b on both lines.")
OFFSET = ("The score of the rotated query at position m and the rotated key at n should depend only on "
          "m - n (for the same q and k), not on m and n separately, but it changes along a diagonal: "
          "turn every pair by an angle proportional to the position, p * base^(-2i/d).")
MIXED = ("The points (1, 0) and (0, 1) come out right, but this x does not: every token must be turned "
         "on its own, by the angle of its own position, whatever the leading dimensions (batch, heads) "
         "are. Work on the last two axes of x, (..., n, d), and keep the others as they are.")
GRADIENT = ("The values are right but the gradient is not. The gradient of a rotation is the output's "
            "gradient turned back, R(-p w_i): build the result from x with differentiable tensor "
            "operations (a hand-written backward must turn back, not forward).")


def rotary_case(name: str, seed: int, shape: tuple, kind: str, dtype=torch.float64, **given) -> Case:
    """A case: x of ``shape``, and ``positions`` (None: 0 .. n-1) or ``base`` when given."""
    return Case(name, seed, {"shape": shape, **given}, dtype, kind=kind)


CASES = [
    rotary_case("3-D x (B=2, n=5, d=8), float32", 0, (2, 5, 8), "3-D", torch.float32),
    rotary_case("2-D x (n=6, d=4)", 1, (6, 4), "2-D"),
    rotary_case("4-D x (B=2, h=3, n=4, d=6)", 2, (2, 3, 4, 6), "4-D"),
    rotary_case("d=2 (one pair)", 3, (3, 7, 2), "one pair"),
    rotary_case("explicit positions [7, 0, 3, 3, 12]", 4, (2, 5, 8), "given positions",
                positions=[7, 0, 3, 3, 12]),
    rotary_case("base=500", 5, (2, 4, 8), "another base", base=500.0),
    rotary_case("positions up to 4000, float32", 6, (2, 6, 16), "positions up to 4000, float32",
                torch.float32, positions=[0, 1, 999, 1000, 3998, 3999]),
]
#: What the probes' images are compared with (on both sides: grading's reference_name is its own).
TURNED = "(cos, sin) and (-sin, cos) of p * base^(-2i/d)"
PROBES = ("even", "odd")  # (1, 0, 1, 0, ...) and (0, 1, 0, 1, ...) at every token


def expect_rotated(out, x: torch.Tensor, what: str, where: str) -> torch.Tensor:
    """The shape and dtype of x."""
    expect_shape(expect_tensor(out, f"{what}'s result", where), x.shape, f"{what}(x) (the shape of x)", where)
    if out.dtype != x.dtype:
        raise CheckFailure(f"{what} should return the dtype of x ({x.dtype}) in {where}, but returned "
                           f"{out.dtype}: give the cosines and sines the dtype of x before they multiply it.")
    return out


def turned_probe(p: float, column: int, d: int, base: float, probe: str, *, halves: bool = False,
                 direction: float = 1.0, exponent: float = 2.0, inverted: bool = False, swap: bool = False,
                 added: bool = False, cat: bool = False) -> float:
    """Entry ``column`` of a probe token at position p after the rotation: the probe "even"
    puts the point (1, 0) in every pair, "odd" the point (0, 1); they should come out as
    (cos, sin) and (-sin, cos) of p * base^(-2i/d). The keywords switch on known mistakes
    (:data:`SWITCHES`)."""
    def x(j: int) -> float:
        return float((j % 2 == 0) == (probe == "even"))

    half = d // 2
    layout_halves = halves or cat  # cat: pairs interleaved, put back as halves
    i, first = (column % half, column < half) if layout_halves else (column // 2, column % 2 == 0)
    a, b = (x(i), x(i + half)) if halves else (x(2 * i), x(2 * i + 1))
    power = exponent * i / d
    angle = direction * p * (base ** power if inverted else base ** -power)
    if added:
        return x(column) + (math.sin(angle) if first else math.cos(angle))
    cos, sin = (math.sin(angle), math.cos(angle)) if swap else (math.cos(angle), math.sin(angle))
    return a * cos - b * sin if first else a * sin + b * cos


def probe_input(shape, probe: str, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` whose every token is the probe (1, 0, 1, 0, ...) or (0, 1, 0, 1, ...)."""
    token = torch.arange(shape[-1]) % 2 == (0 if probe == "even" else 1)
    return token.to(dtype).expand(shape).clone()


def probe_images(shape, positions, base: float, *, start: int = 0, **switch) -> torch.Tensor:
    """(2, *shape) float64: both probes after the rotation (with ``switch``: after a mistake)."""
    d = shape[-1]
    rows = [[[turned_probe(p + start, c, d, base, probe, **switch) for c in range(d)] for p in positions]
            for probe in PROBES]
    images = torch.tensor(rows, dtype=torch.float64)  # (2, n, d)
    return images.reshape(2, *[1] * (len(shape) - 2), *shape[-2:]).expand(2, *shape)


def _variants(shape, positions, base: float) -> dict:
    def images(switch):
        switch = dict(switch)
        where = range(shape[-2]) if switch.pop("ignore_positions", False) else positions
        return lambda: {"output": probe_images(shape, where, switch.pop("base", base), **switch)}

    return {mistake: images(switch) for mistake, switch in SWITCHES.items()}


def pair_sums(t: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d/2): the sum of each pair (columns 2i and 2i+1)."""
    return t[..., 0::2] + t[..., 1::2]


def _property_hint(apply_rotary, images: torch.Tensor) -> str | None:
    """A property the learner's rotation breaks, when no known mistake matches: the length of
    each pair, or a score that depends on the offset m - n only."""
    images = images.detach().double()
    if not torch.isfinite(images).all():
        return None
    if not close(pair_sums(images ** 2), torch.ones_like(pair_sums(images)), 1e-4, 1e-4):
        return LENGTH
    q, k = seeded(1, 8, seed=41).double().repeat(12, 1), seeded(1, 8, seed=42).double().repeat(12, 1)
    try:
        scores = apply_rotary(q) @ apply_rotary(k).T  # (12, 12): the query at m, the key at n
    except Exception:  # noqa: BLE001 - learner code; the failure is reported already
        return None
    if not close(scores[1:, 1:], scores[:-1, :-1], 1e-6, 1e-6):
        return OFFSET
    return None


def _with_hint(text: str, compare) -> None:
    try:
        compare()
    except CheckFailure as failure:
        raise CheckFailure(f"{failure}\n{text}", failure.mistake) from None


class ApplyRotary(Exercise):
    """Every pair's points (1, 0) and (0, 1) turned by p * base^(-2i/d) (the formula, entry by entry),
    any x a combination of them pair by pair, and the gradient turned back."""

    name = "apply_rotary"
    reference_name = TURNED
    visible_cases = CASES
    learner = None  # run's: for the hint about the scores

    def rotate(self, impl, case: Case, x: torch.Tensor, positions) -> torch.Tensor:
        """The learner's apply_rotary(x[, positions][, base=...]) as the case gives them."""
        base = case.params.get("base")
        args = (x,) if positions is None and base is None else (x, positions)
        out = self.call(case, impl, *args, **({} if base is None else {"base": base}))
        return expect_rotated(out, x, self.name, str(case))

    def run(self, impl, case, device):
        shape, given = case.params["shape"], case.params.get("positions")
        positions = None if given is None else torch.tensor(given, device=device)
        x = randn(shape, generator(case.seed), case.dtype, device).requires_grad_()
        out = with_gradients(lambda: (self.rotate(impl, case, x, positions),), ("output",), {"x": x},
                             case.seed)
        probes = [probe_input(shape, probe, case.dtype).to(device) for probe in PROBES]
        with torch.no_grad():  # (2, *shape): what the probes become
            out["images"] = torch.stack([self.rotate(impl, case, probe, positions) for probe in probes])
        self.learner = impl  # for the hint about the scores, should the images be wrong
        return out

    def evaluate(self, case, got, device):
        shape, base, where = case.params["shape"], case.params.get("base") or 10000.0, str(case)
        at = case.params.get("positions") or list(range(shape[-2]))
        atol = angle_tolerance(max(at))  # grows with the largest position, as in grading
        images = got["images"].double()
        compare_outputs({"output": images}, {"output": probe_images(shape, at, base)},
                        "apply_rotary of the points (1, 0) and (0, 1) of every pair", where, atol=2 * atol,
                        against=TURNED, variants=_variants(shape, at, base),
                        hint=lambda key, have: _property_hint(self.learner, images))
        x = randn(shape, generator(case.seed), case.dtype, device).double()
        a, b = (x[..., j::2].repeat_interleave(2, dim=-1) for j in (0, 1))
        combined = a * images[0] + b * images[1]  # a·R(1, 0) + b·R(0, 1), pair by pair
        _with_hint(MIXED, partial(
            compare_outputs, {"output": got["output"].double()}, {"output": combined}, "apply_rotary(x)",
            where, atol=atol * (1 + float(combined.abs().max())), against="a times the turned (1, 0) plus b "
            "times the turned (0, 1), for every pair (a, b) of x (a rotation is linear)"))
        g = randn(shape, generator(case.seed + 7919), case.dtype, device).double()  # with_gradients' own
        want = torch.stack([pair_sums(g * images[0]), pair_sums(g * images[1])], dim=-1).flatten(-2)
        _with_hint(GRADIENT, lambda: compare_outputs(
            {"output": got["grad x"].double()}, {"output": want}, "the gradient of apply_rotary(x)", where,
            atol=atol * (1 + float(want.abs().max())),
            against="the output's gradient turned back (the transpose of a rotation)"))

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(torch.zeros(2, 3, 5)), "for an odd d=5")


@visible_check
def check_apply_rotary(apply_rotary) -> None:
    """Every pair's points (1, 0) and (0, 1) turned by p * base^(-2i/d) (the formula, entry by
    entry), any x a combination of them pair by pair, and the gradient turned back; 2-D to 4-D,
    given positions, another base, float32 up to position 4000; the ValueError."""
    ApplyRotary().run_cases(apply_rotary)
    passed("apply_rotary turns every pair by p·w_i: the score depends on q, k and their offset only.")
