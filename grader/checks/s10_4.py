"""Hidden checks for 10.4 Positional encoding.

PyTorch has no built-in sinusoidal encoding, so the reference is the formula of
"Attention Is All You Need" evaluated here in float64, written independently of the
notebook: frequencies by ``pow``, sine and cosine interleaved by ``stack`` + ``flatten``.
The rotary embedding's reference multiplies complex numbers: pair ``(a, b)`` is ``a + ib``,
turned by ``e^(i p omega_i)`` (``torch.polar``), where the notebook uses sines and cosines.

Float32 answers carry rounding in the angle ``pos * omega``: about ``pos * 2**-24`` for an
accurate computation, a few times that for ``exp``/``pow`` in float32. The tolerance grows
with the largest position involved (:func:`angle_tolerance`); every known mistake is off by
far more than that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from course.compare import angle_tolerance
from grader.checks.common import F64, encoding, encoding_table, frequencies
from grader.checks.core import (
    Case,
    CheckFailure,
    Mistake,
    Outputs,
    call_learner,
    close,
    describe_difference,
    diagnose,
    expect_tensor,
    generator,
    randn,
)
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    check_unplaced_tensors,
    expect_value_error,
    forward_backward,
)

# ---------------------------------------------------------------- comparing with a tolerance


def compare_within(exercise: str, case: Case, got: Outputs, expected: Outputs, atol: float,
                   mistakes: Mapping[str, Mistake],
                   mistake_outputs: Callable[[], Mapping[str, Outputs]],
                   wording: Mapping[str, str], hint: Callable[[str, torch.Tensor], str | None]) -> None:
    """Like core.compare_outputs, with an explicit absolute tolerance and our own wording.

    ``wording[key]`` says what a differing output is compared with; ``hint(key, got)`` may
    add a property-based hint when no known mistake matches.
    """
    for key, want in expected.items():
        if key not in got:
            raise CheckFailure(f"{exercise}: no {key} was produced in {case}.")
        have = got[key]
        if tuple(have.shape) != tuple(want.shape):
            raise CheckFailure(f"{exercise}: {key} should have shape {tuple(want.shape)} in {case}, "
                               f"but has shape {tuple(have.shape)}.")
        if close(have, want, 1e-6, atol):
            continue
        message = (f"{exercise}: {key} differs from {wording.get(key, 'the reference')} in {case}: "
                   f"{describe_difference(have, want)} (allowed {atol:.1g}).")
        diagnosis = diagnose(key, have, mistakes, mistake_outputs(), 1e-6, atol)
        if diagnosis is None:
            diagnosis = hint(key, have)
        raise CheckFailure(message + (f"\n{diagnosis}" if diagnosis else ""))


def property_hint(pe: torch.Tensor, d_model: int) -> str | None:
    """Which property of the encoding ``pe`` (positions 0, 1, ... in its rows) breaks first."""
    pe = pe.detach().to(F64)
    if pe.shape[0] == 0 or not torch.isfinite(pe).all():
        return None
    row0 = torch.tensor([0.0, 1.0] * ((d_model + 1) // 2), dtype=F64, device=pe.device)[:d_model]
    if not torch.allclose(pe[0], row0, atol=1e-5):
        return ("Row 0 is position 0: sin(0) = 0 in the even columns and cos(0) = 1 in the odd "
                "columns. Count positions from 0 and put the sine in column 2i, the cosine in 2i+1.")
    pairs = d_model // 2
    if pairs:
        radius = pe[:, 0 : 2 * pairs : 2] ** 2 + pe[:, 1 : 2 * pairs : 2] ** 2  # (P, pairs)
        bad = (radius - 1).abs().amax(0) > 1e-4
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            return (f"Columns {2 * i} and {2 * i + 1} should be the sine and cosine of the same "
                    f"angle (sin² + cos² = 1), but for pair i={i} they are not.")
    if pe.shape[0] > 1 and pairs:
        angle1 = torch.atan2(pe[1, 0 : 2 * pairs : 2], pe[1, 1 : 2 * pairs : 2])  # omega_i
        want = frequencies(d_model, pe.device)[:pairs]
        bad = (angle1 - want).abs() > 1e-4
        if bad.any():
            i = int(torch.nonzero(bad)[0])
            return (f"The angle of pair i={i} should grow by omega_i = 1 / 10000^(2i / d_model) per "
                    "position (the frequency ladder); it does not.")
    return None


# ---------------------------------------------------------------- the encoding function


def _table_mistake(**switch) -> Callable[[Case, torch.device], Outputs]:
    def run(case: Case, device: torch.device) -> Outputs:
        return {"pe": encoding_table(case.params["max_len"], case.params["d_model"], device, **switch)}
    return run


FORMULA = "PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(the same angle)"

ENCODING_MISTAKES = {
    "swapped": Mistake("sine and cosine swapped (cosine in the even columns)",
                       "Even columns 2i hold the sine, odd columns 2i+1 the cosine.",
                       _table_mistake(swap=True)),
    "from_one": Mistake("positions counted from 1 instead of 0",
                        "Use torch.arange(max_len): the first row is position 0.",
                        _table_mistake(start=1)),
    "exponent_i": Mistake("the exponent i/d_model instead of 2i/d_model (pair index without the 2)",
                          "Pair i uses 10000^(2i/d_model); torch.arange(0, d_model, 2) gives 2i "
                          "directly.", _table_mistake(exponent="i/d")),
    "exponent_4i": Mistake("the exponent 4i/d_model: the column index 2i doubled again",
                           "torch.arange(0, d_model, 2) already is 2i: do not multiply it by 2.",
                           _table_mistake(exponent="4i/d")),
    "cos_column": Mistake("the cosine's exponent taken from its own column index: (2i+1)/d_model "
                          "instead of 2i/d_model", "The sine in column 2i and the cosine in column "
                          "2i+1 share one angle, pos / 10000^(2i/d_model).",
                          _table_mistake(cos_column=True)),
    "inverted": Mistake("10000^(2i/d_model) inverted: the angle pos * 10000^(2i/d_model)",
                        "Divide the position by 10000^(2i/d_model) (or multiply by its "
                        "inverse, exp(-2i * ln(10000) / d_model)).", _table_mistake(inverted=True)),
    "halves": Mistake("the sines and cosines in two halves [sin ... sin, cos ... cos] instead of "
                      "interleaved pairs", "Interleave them: pe[:, 0::2] = sin, pe[:, 1::2] = cos.",
                      _table_mistake(halves=True)),
}

ENCODING_CASES = [  # max_len, d_model
    Case("max_len=6, d_model=8", 700, {"max_len": 6, "d_model": 8}, torch.float32),
    Case("odd d_model=7", 701, {"max_len": 9, "d_model": 7}, torch.float32),
    Case("odd d_model=3", 702, {"max_len": 5, "d_model": 3}, torch.float32),
    Case("one position", 703, {"max_len": 1, "d_model": 4}, torch.float32),
    Case("d_model=2 (one pair)", 704, {"max_len": 50, "d_model": 2}, torch.float32),
    Case("100 positions, d_model=64", 705, {"max_len": 100, "d_model": 64}, torch.float32),
    Case("2000 positions, odd d_model=17", 706, {"max_len": 2000, "d_model": 17}, torch.float32),
]


class SinusoidalPositionalEncoding(Exercise):
    name = "sinusoidal_positional_encoding"
    reference_name = "the formula evaluated in float64"
    mistakes = ENCODING_MISTAKES

    def cases(self):
        return ENCODING_CASES

    def run(self, impl, case, device):
        p = case.params
        try:
            out = call_learner(self.name, self.forbidden, case, impl, p["max_len"], p["d_model"])
        except CheckFailure as failure:
            if p["d_model"] % 2 and "raised" in str(failure):
                raise CheckFailure(f"{failure}\nWith an odd d_model there is one more even column (sine) "
                                   "than odd columns (cosine): the cosines use only the first "
                                   "d_model // 2 angles.") from None
            raise
        return {"pe": expect_tensor(out, f"{self.name}'s result", case).detach().to(device)}

    def reference(self, case, device):
        return {"pe": encoding_table(case.params["max_len"], case.params["d_model"], device)}

    def evaluate(self, case, got, device):
        pe = got["pe"]
        if pe.dtype != torch.float32:
            raise CheckFailure(f"{self.name} should return a float32 tensor, but returned {pe.dtype} "
                               f"in {case}. Compute in float64 if you like, then convert with .float().")
        d_model = case.params["d_model"]
        compare_within(self.name, case, got, self.expected(case, device),
                       angle_tolerance(case.params["max_len"]), self.mistakes,
                       lambda: {n: m.run(case, device) for n, m in self.mistakes.items()},
                       {"pe": f"the formula ({FORMULA})"},
                       lambda key, have: property_hint(have, d_model))


# ---------------------------------------------------------------- the module


MODULE_CASES = [  # B, n, d_model, max_len (None: the default 5000)
    Case("B=2, n=5, d_model=8, max_len=12", 720, {"dims": (2, 5, 8), "max_len": 12}),
    Case("n equal to max_len", 721, {"dims": (3, 7, 6), "max_len": 7}),
    Case("odd d_model=5, default max_len", 722, {"dims": (2, 4, 5), "max_len": None}),
    Case("one position", 723, {"dims": (2, 1, 4), "max_len": 3}),
    Case("float32, B=2, n=9, d_model=12", 724, {"dims": (2, 9, 12), "max_len": 20}, torch.float32),
]


def _module_input(case: Case, device: torch.device) -> torch.Tensor:
    return randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()


def _added(case: Case, device: torch.device, table: torch.Tensor, scale: float = 1.0) -> Outputs:
    """x * scale + table[:n] with its input gradient: the reference and its mistaken variants."""
    x = _module_input(case, device)
    n = case.params["dims"][1]
    pe = table[:n].to(case.dtype)
    return forward_backward(lambda: (x * scale + pe,), ("output",), {"x": x}, case.seed)


def _module_mistake(name: str) -> Mistake:
    """An encoding mistake, seen through the module."""
    base = ENCODING_MISTAKES[name]

    def run(case: Case, device: torch.device) -> Outputs:
        _, n, d = case.params["dims"]
        fake = Case(case.name, case.seed, {"max_len": n, "d_model": d})
        return _added(case, device, base.run(fake, device)["pe"])

    return Mistake(base.description, base.hint, run)


def _scaled_mistake(case: Case, device: torch.device) -> Outputs:
    _, n, d = case.params["dims"]
    return _added(case, device, encoding_table(n, d, device), scale=math.sqrt(d))


MODULE_MISTAKES = {
    "scaled": Mistake("x multiplied by sqrt(d_model) before adding pe",
                      "PositionalEncoding only adds pe[:n]; scaling the embeddings by "
                      "sqrt(d_model) belongs to the embedding layer (10.6).", _scaled_mistake),
    **{name: _module_mistake(name) for name in ENCODING_MISTAKES},
}

BUFFER_HOW = ("Compute the encoding once in __init__ and keep it with "
              "self.register_buffer('pe', sinusoidal_positional_encoding(max_len, d_model)): a "
              "buffer follows .to(device) and state_dict() but is not a trained parameter.")


def check_buffer(exercise: str, module: torch.nn.Module, max_len: int, d_model: int) -> None:
    """The encoding must be a registered, persistent buffer ``pe`` of shape (max_len, d_model)."""
    if "pe" in dict(module.named_parameters()):
        raise CheckFailure(f"{exercise}: pe is an nn.Parameter, so the optimiser would train it. "
                           + BUFFER_HOW)
    buffers = dict(module.named_buffers())
    if "pe" not in buffers:
        raise CheckFailure(f"{exercise} has no registered buffer called pe. " + BUFFER_HOW)
    if "pe" not in module.state_dict():
        raise CheckFailure(f"{exercise}: pe is registered with persistent=False, so it is not saved "
                           "in state_dict(). Register it as a normal (persistent) buffer.")
    shape = tuple(buffers["pe"].shape)
    if shape != (max_len, d_model):
        raise CheckFailure(f"{exercise}: the buffer pe should have shape (max_len, d_model) = "
                           f"{(max_len, d_model)}, but has shape {shape}. Keep it 2-D and slice "
                           "pe[:n] in forward.")


class PositionalEncodingModule(Exercise):
    name = "PositionalEncoding"
    reference_name = "the formula evaluated in float64"
    mistakes = MODULE_MISTAKES

    def cases(self):
        return MODULE_CASES

    def _build(self, impl, case: Case) -> torch.nn.Module:
        d = case.params["dims"][2]
        max_len = case.params["max_len"]
        args = (d,) if max_len is None else (d, max_len)
        module = build_module(self.name, self.forbidden, case, impl, *args)
        check_buffer(self.name, module, 5000 if max_len is None else max_len, d)
        return module

    def run(self, impl, case, device):
        module = self._build(impl, case).to(device)
        x = _module_input(case, device)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x)
            return (expect_tensor(out, f"{self.name}.forward's result", case),)

        return forward_backward(call, ("output",), {"x": x}, case.seed)

    def reference(self, case, device):
        _, n, d = case.params["dims"]
        return _added(case, device, encoding_table(n, d, device))

    def evaluate(self, case, got, device):
        n = case.params["dims"][1]
        compare_within(self.name, case, got, self.expected(case, device), angle_tolerance(n),
                       self.mistakes, lambda: {k: m.run(case, device) for k, m in self.mistakes.items()},
                       {"output": "x + pe[:n]", "grad x": "the gradient of x + pe[:n]"},
                       lambda key, have: None)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, max_len=6)(torch.zeros(2, 7, 8)),
                           "when x has n=7 positions but max_len=6")
        self._check_dropout(impl)

        def on(dev):
            module = impl(8, max_len=20).to(dev)
            module(torch.zeros(2, 5, 8, device=dev))

        check_device_independence(self.name, on)

    def _check_dropout(self, impl) -> None:
        """dropout(x + pe[:n]): in train() mode every entry is 0 or 2 (x + pe); eval() turns it off."""
        case = Case("d_model=8, max_len=50, dropout=0.5", 729, {}, torch.float32)
        module = build_module(self.name, self.forbidden, case, impl, 8, max_len=50, dropout=0.5)
        x = torch.ones(4, 50, 8)
        want = x + encoding_table(50, 8, torch.device("cpu")).float()
        atol = angle_tolerance(50)
        with torch.no_grad():
            module.eval()
            if not close(call_learner(self.name, self.forbidden, case, module, x), want, 1e-6, atol):
                raise CheckFailure(f"{self.name}(8, max_len=50, dropout=0.5) in eval() mode should "
                                   "return x + pe[:n]: use nn.Dropout (a module, off in eval mode), "
                                   "not F.dropout(..., training=True).")
            module.train()
            out = call_learner(self.name, self.forbidden, case, module, x)
        dropped = out.abs() <= atol
        kept = (out - 2 * want).abs() <= 2 * atol
        if not bool((dropped | kept).all()) or not bool(dropped.any()):
            raise CheckFailure(f"{self.name}(8, max_len=50, dropout=0.5) in train() mode should apply "
                               "dropout to the sum: every entry 0 or 2·(x + pe). Return "
                               "self.dropout(x + pe[:n]).")


# ---------------------------------------------------------------- the shift matrix


def shift_matrix(k: int, d_model: int, device: torch.device, *, transposed: bool = False,
                 halves: bool = False, same_angle: bool = False, **omega_mistakes) -> torch.Tensor:
    """M_k in float64, built entry by entry from the addition formulas (and known mistakes)."""
    omega = frequencies(d_model, device, **omega_mistakes)[: d_model // 2]
    angle = k * (torch.ones_like(omega) if same_angle else omega)
    M = torch.zeros(d_model, d_model, dtype=F64, device=device)
    for i in range(d_model // 2):
        s, c = (i, i + d_model // 2) if halves else (2 * i, 2 * i + 1)
        sign = -1.0 if transposed else 1.0
        M[s, s] = M[c, c] = torch.cos(angle[i])
        M[s, c] = sign * torch.sin(angle[i])
        M[c, s] = -sign * torch.sin(angle[i])
    return M


def shift_positions(k: int, device: torch.device) -> torch.Tensor:
    """Positions pos (with pos + k >= 0) near the start and near 10 000: far beyond any max_len."""
    positions = torch.cat([torch.arange(0, 40), torch.arange(9_960, 10_001)]).to(device, F64)
    return positions[positions + k >= 0]


def _shift_outputs(M: torch.Tensor, case: Case, device: torch.device) -> Outputs:
    positions = shift_positions(case.params["k"], device)
    pe = encoding(positions, case.params["d_model"])  # (P, d_model), float64
    return {"M @ pe[pos]": pe @ M.T, "M": M}  # row j: (M @ pe[pos_j])^T


def _shift_mistake(description: str, hint: str, **switch) -> Mistake:
    def run(case: Case, device: torch.device) -> Outputs:
        M = shift_matrix(case.params["k"], case.params["d_model"], device, **switch)
        return _shift_outputs(M, case, device)
    return Mistake(description, hint, run)


SHIFT_HINT = ("Row 2i (the sine) is [.. cos(k w_i), +sin(k w_i) ..], row 2i+1 (the cosine) is "
              "[.. -sin(k w_i), cos(k w_i) ..].")

SHIFT_MISTAKES = {
    "transposed": _shift_mistake(
        "the rotation transposed: the signs of the sine terms swapped (a shift by -k)",
        "sin(a+b) = cos b·sin a + sin b·cos a, cos(a+b) = -sin b·sin a + cos b·cos a. " + SHIFT_HINT,
        transposed=True),
    "exponent_i": _shift_mistake("the exponent i/d_model instead of 2i/d_model in omega_i",
                                 "omega_i = 1 / 10000^(2i/d_model), as in the encoding.",
                                 exponent="i/d"),
    "exponent_4i": _shift_mistake("the exponent 4i/d_model: the column index 2i doubled again",
                                  "torch.arange(0, d_model, 2) already is 2i.", exponent="4i/d"),
    "inverted": _shift_mistake("omega_i inverted (10000^(+2i/d_model))",
                               "omega_i = 1 / 10000^(2i/d_model).", inverted=True),
    "same_angle": _shift_mistake("every block rotated by the same angle k",
                                 "Pair i turns by k·omega_i: each block has its own frequency.",
                                 same_angle=True),
    "halves": _shift_mistake("blocks pairing column i with column i + d_model/2 (the halves layout)",
                             "The encoding interleaves its pairs: columns 2i and 2i+1.", halves=True),
}

SHIFT_CASES = [  # k, d_model
    Case("k=1, d_model=8", 740, {"k": 1, "d_model": 8}),
    Case("k=3, d_model=16", 741, {"k": 3, "d_model": 16}),
    Case("k=0 (the identity), d_model=8", 742, {"k": 0, "d_model": 8}),
    Case("k=-2 (a shift back), d_model=8", 743, {"k": -2, "d_model": 8}),
    Case("k=1, d_model=2", 744, {"k": 1, "d_model": 2}),
    Case("k=37, d_model=6", 745, {"k": 37, "d_model": 6}),
    Case("k=100, d_model=64", 746, {"k": 100, "d_model": 64}),
]


class RelativeShiftMatrix(Exercise):
    name = "relative_shift_matrix"
    reference_name = "the formula evaluated in float64"
    mistakes = SHIFT_MISTAKES

    def cases(self):
        return SHIFT_CASES

    def run(self, impl, case, device):
        k, d = case.params["k"], case.params["d_model"]
        M = expect_tensor(call_learner(self.name, self.forbidden, case, impl, k, d),
                          f"{self.name}'s result", case)
        if not M.is_floating_point():
            raise CheckFailure(f"{self.name} should return a floating-point matrix (float32), but "
                               f"returned {M.dtype} in {case}.")
        if tuple(M.shape) != (d, d):
            raise CheckFailure(f"{self.name}({k}, {d}) should have shape {(d, d)}, but has shape "
                               f"{tuple(M.shape)}.")
        return _shift_outputs(M.detach().to(device, F64), case, device)

    def reference(self, case, device):
        positions = shift_positions(case.params["k"], device)
        d = case.params["d_model"]
        return {"M @ pe[pos]": encoding(positions + case.params["k"], d),
                "M": shift_matrix(case.params["k"], d, device)}

    def evaluate(self, case, got, device):
        atol = 2 * angle_tolerance(abs(case.params["k"]) + 1)
        compare_within(self.name, case, got, self.expected(case, device), atol, self.mistakes,
                       lambda: {n: m.run(case, device) for n, m in self.mistakes.items()},
                       {"M @ pe[pos]": "pe[pos + k] (positions up to 10 000)",
                        "M": "the block-diagonal rotation matrix"},
                       lambda key, have: None)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(1, 7), "for an odd d_model=7")


# ---------------------------------------------------------------- rotary position embedding


def rotary(x: torch.Tensor, positions: torch.Tensor, base: float, *, halves: bool = False,
           direction: float = 1.0, exponent: str = "2i/d", inverted: bool = False,
           swap: bool = False, added: bool = False) -> torch.Tensor:
    """Rotary embedding of float64 ``x`` (..., n, d) at float64 ``positions`` (n,), float64.

    The reference (every switch off) turns pair i, ``a + ib = (x[..., 2i], x[..., 2i+1])``, by
    the angle ``p * base^(-2i/d)``: a product of complex numbers. The switches are known
    mistakes: ``halves`` pairs column i with column i + d/2; ``direction=-1`` turns clockwise;
    ``exponent``/``inverted`` as in :func:`frequencies`; ``swap`` exchanges the cosine and the
    sine; ``added`` adds the sinusoidal table instead of rotating.
    """
    d = x.shape[-1]
    pair = torch.arange(d // 2, dtype=F64, device=x.device)
    power = {"2i/d": 2 * pair / d, "i/d": pair / d, "4i/d": 4 * pair / d}[exponent]
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
    if halves:
        return torch.cat([a, b], dim=-1)
    return torch.stack([a, b], dim=-1).flatten(-2)  # a0' b0' a1' b1' ...


ROTARY_CASES = [  # shape of x, positions (None: 0 .. n-1), base; "offset": the score property
    Case("offset: one query and one key at positions 0 .. 11", 768, {"offset": True, "shape": (12, 8)}),
    Case("2-D x (n=5, d=8)", 760, {"shape": (5, 8)}),
    Case("3-D x (B=2, n=6, d=4)", 761, {"shape": (2, 6, 4)}),
    Case("4-D x (B=2, h=3, n=5, d=6)", 762, {"shape": (2, 3, 5, 6)}),
    Case("d=2 (one pair)", 763, {"shape": (3, 7, 2)}),
    Case("explicit positions [7, 0, 3, 3, 12]", 764, {"shape": (2, 5, 8), "positions": [7, 0, 3, 3, 12]}),
    Case("base=500", 765, {"shape": (2, 4, 8), "base": 500.0}),
    Case("positions up to 4000, float32", 766,
         {"shape": (2, 6, 16), "positions": [0, 1, 999, 1000, 3998, 3999]}, torch.float32),
    Case("float32, 4-D x (B=3, h=2, n=9, d=12)", 767, {"shape": (3, 2, 9, 12)}, torch.float32),
]

ROTARY_FORMULA = "pair (x[..., 2i], x[..., 2i+1]) turned counter-clockwise by p * base^(-2i/d)"


def _rotary_positions(case: Case, device: torch.device) -> torch.Tensor | None:
    given = case.params.get("positions")
    return None if given is None else torch.tensor(given, dtype=torch.long, device=device)


def _rotary_outputs(rotate, case: Case, device: torch.device) -> Outputs:
    """What ``rotate(x, positions)`` gives on ``case``: the output and its gradient, or the
    scores of the offset case."""
    g = generator(case.seed)
    shape = case.params["shape"]
    x = randn(shape, g, case.dtype, device)
    if "offset" in case.params:  # one query and one key, each placed at every position
        q, k = x[:1].repeat(len(x), 1), x[1:2].repeat(len(x), 1)  # (P, d)
        turned_q, turned_k = rotate(q, None).detach(), rotate(k, None).detach()
        return {"rotated q": turned_q, "scores": turned_q @ turned_k.T}  # scores[m, n]: q at m, k at n
    x.requires_grad_()
    positions = _rotary_positions(case, device)
    return forward_backward(lambda: (rotate(x, positions),), ("output",), {"x": x}, case.seed)


def _rotary_reference_fn(case: Case, **switch):
    base = case.params.get("base", 10000.0)

    def rotate(x, positions):
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        return rotary(x.to(F64), positions, base, **switch).to(x.dtype)

    return rotate


def _rotary_mistake(description: str, hint: str, *, start: int = 0, ignore_positions: bool = False,
                    base=None, **switch) -> Mistake:
    def run(case: Case, device: torch.device) -> Outputs:
        used = case.params.get("base", 10000.0) if base is None else base

        def rotate(x, positions):
            if positions is None or ignore_positions:
                positions = torch.arange(x.shape[-2], device=x.device)
            return rotary(x.to(F64), positions + start, used, **switch).to(x.dtype)

        return _rotary_outputs(rotate, case, device)

    return Mistake(description, hint, run)


ROTARY_MISTAKES = {
    "halves": _rotary_mistake(
        "pairs made of column i and column i + d/2 (the 'rotate_half' layout of some libraries)",
        "This notebook pairs neighbouring columns, like the sinusoidal table: (x[..., 2i], "
        "x[..., 2i+1]), that is x[..., 0::2] with x[..., 1::2].", halves=True),
    "clockwise": _rotary_mistake(
        "each pair turned clockwise (the signs of the sine terms swapped)",
        "Counter-clockwise: (a, b) -> (a cos - b sin, a sin + b cos).", direction=-1.0),
    "exponent_i": _rotary_mistake(
        "the exponent i/d instead of 2i/d (pair index without the 2)",
        "Pair i turns by p * base^(-2i/d); torch.arange(0, d, 2) gives 2i directly.", exponent="i/d"),
    "exponent_4i": _rotary_mistake(
        "the exponent 4i/d: the column index 2i doubled again",
        "torch.arange(0, d, 2) already is 2i: do not multiply it by 2.", exponent="4i/d"),
    "inverted": _rotary_mistake(
        "the frequency inverted: the angle p * base^(+2i/d)",
        "Pair i turns by p / base^(2i/d): the first pair fastest, the last slowest.", inverted=True),
    "from_one": _rotary_mistake(
        "positions counted from 1 instead of 0",
        "Without positions, token j is at position j = 0, 1, ..., n-1: the first token is not "
        "rotated at all.", start=1),
    "positions_ignored": _rotary_mistake(
        "the positions argument ignored (always 0 .. n-1)",
        "When positions is given, token j is at position positions[j].", ignore_positions=True),
    "base_ignored": _rotary_mistake(
        "the base argument ignored (always 10000)", "Use base in the frequencies: base^(-2i/d).",
        base=10000.0),
    "swapped": _rotary_mistake(
        "cosine and sine exchanged: (a sin - b cos, a cos + b sin)",
        "The cosine multiplies the coordinate itself: (a cos - b sin, a sin + b cos).", swap=True),
    "added": _rotary_mistake(
        "the sinusoidal encoding added to x instead of rotating x",
        "Rotary embedding multiplies: each pair (a, b) becomes (a cos - b sin, a sin + b cos), "
        "so its length stays the same.", added=True),
}


def _pair_lengths(t: torch.Tensor) -> torch.Tensor:
    return t[..., 0::2] ** 2 + t[..., 1::2] ** 2


class ApplyRotary(Exercise):
    name = "apply_rotary"
    reference_name = "the rotation evaluated in float64"
    mistakes = ROTARY_MISTAKES

    def cases(self):
        return ROTARY_CASES

    def run(self, impl, case, device):
        base = case.params.get("base")

        def rotate(x, positions):
            args = (x,) if positions is None and base is None else (x, positions)
            kwargs = {} if base is None else {"base": base}
            out = expect_tensor(call_learner(self.name, self.forbidden, case, impl, *args, **kwargs),
                                f"{self.name}'s result", case)
            if tuple(out.shape) != tuple(x.shape):
                raise CheckFailure(f"{self.name} should return the shape of x, {tuple(x.shape)}, in "
                                   f"{case}, but returned {tuple(out.shape)}.")
            if out.dtype != x.dtype:
                raise CheckFailure(f"{self.name} should return the dtype of x ({x.dtype}) in {case}, "
                                   f"but returned {out.dtype}: convert the cosines and sines with "
                                   ".to(x.dtype) (or build them in x.dtype).")
            return out

        return _rotary_outputs(rotate, case, device)

    def reference(self, case, device):
        return _rotary_outputs(_rotary_reference_fn(case), case, device)

    def evaluate(self, case, got, device):
        expected = self.reference(case, device)
        positions = case.params.get("positions") or [case.params["shape"][-2] - 1]
        scale = 1.0 + max(float(v.abs().max()) for v in expected.values())
        atol = angle_tolerance(max(positions)) * scale * (4 if "offset" in case.params else 1)
        compare_within(self.name, case, got, expected, atol, self.mistakes,
                       lambda: {n: m.run(case, device) for n, m in self.mistakes.items()},
                       {"output": ROTARY_FORMULA, "rotated q": ROTARY_FORMULA,
                        "grad x": "the gradient of the rotation",
                        "scores": "the scores of the rotated query and key"},
                       lambda key, have: self._hint(case, {**got, key: have}, device))

    @staticmethod
    def _hint(case: Case, got: Outputs, device) -> str | None:
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
            return ("The length of each pair (x[..., 2i], x[..., 2i+1]) should not change (a "
                    "rotation), but it does: new a = a cos - b sin, new b = a sin + b cos, with the "
                    "old a and b on both lines.")
        scores = got.get("scores")
        if scores is not None and scores.dim() == 2 and not close(scores[1:, 1:], scores[:-1, :-1],
                                                                  1e-6, 1e-6):
            return ("The score of the rotated query at position m and the rotated key at n should "
                    "depend only on m - n, but it changes along a diagonal: turn every pair by an "
                    "angle proportional to the position, p * base^(-2i/d).")
        return None

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(torch.zeros(2, 3, 5)), "for an odd d=5")
        x = torch.zeros(2, 3, 4)
        check_unplaced_tensors(self.name, lambda: impl(x))
        check_unplaced_tensors(self.name, lambda: impl(x, torch.tensor([2, 0, 1], device=x.device)))


sinusoidal_positional_encoding = SinusoidalPositionalEncoding()
positional_encoding = PositionalEncodingModule()
relative_shift_matrix = RelativeShiftMatrix()
apply_rotary = ApplyRotary()
EXERCISES = [sinusoidal_positional_encoding, positional_encoding, relative_shift_matrix, apply_rotary]
check_sinusoidal_positional_encoding = sinusoidal_positional_encoding.check
check_PositionalEncoding = positional_encoding.check
check_relative_shift_matrix = relative_shift_matrix.check
check_apply_rotary = apply_rotary.check
