"""Visible checks of 10.4 Positional encoding.

PyTorch has no sinusoidal encoding, so the reference is the formula of the notebook,
evaluated entry by entry with Python's ``math`` at sampled entries (every column, the
first, a middle and the last positions) rather than as a whole table. The tolerance grows
with the largest position, as in grading (float32 angles carry rounding).
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from course.compare import Mistake, angle_tolerance, close
from course.testing import (
    VisibleCheckFailure,
    check_close,
    check_shape,
    check_tensor,
    expect_value_error,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)

FORMULA = "the formula (sine in column 2i, cosine in column 2i+1, of pos / 10000^(2i/d_model))"


def formula(pos: float, column: int, d_model: int, *, swap: bool = False, exponent: float = 2.0,
            inverted: bool = False, cos_column: bool = False) -> float:
    """One entry of the encoding; the keywords switch on known mistakes.

    ``exponent``: the factor before i in 10000^(exponent·i/d_model) (2 is right);
    ``inverted``: pos * 10000^(...) instead of pos / 10000^(...); ``swap``: cosine in the
    even columns; ``cos_column``: the cosine's exponent from its own column index 2i+1.
    """
    pair = column // 2
    power = (column if cos_column and column % 2 else exponent * pair) / d_model
    angle = pos * 10000.0 ** power if inverted else pos / 10000.0 ** power
    sine = (column % 2 == 0) != swap
    return math.sin(angle) if sine else math.cos(angle)


def halves_formula(pos: float, column: int, d_model: int) -> float:
    """The wrong layout [sin ... sin, cos ... cos]: column j < ceil(d/2) is the sine of pair j."""
    sines = (d_model + 1) // 2
    if column < sines:
        return formula(pos, 2 * column, d_model)
    return formula(pos, 2 * (column - sines) + 1, d_model)


def sampled_positions(max_len: int, d_model: int) -> list[int]:
    """The positions (rows) checked: all of a small table, else the first, middle and last ones."""
    if max_len * d_model <= 600:
        return list(range(max_len))
    return sorted({0, 1, 2, 3, max_len // 3, max_len // 2, max_len - 2, max_len - 1})


def table(entry, positions, d_model: int, start: int = 0) -> torch.Tensor:
    """``entry(pos, column, d_model)`` for every column of ``positions``: (P, d_model), float64."""
    return torch.tensor([[entry(p + start, c, d_model) for c in range(d_model)] for p in positions],
                        dtype=torch.float64)


ENCODING_MISTAKES = {  # name: (description, hint, entry, first position)
    "swapped": ("sine and cosine swapped (cosine in the even columns)",
                "Even columns 2i hold the sine, odd columns 2i+1 the cosine.",
                partial(formula, swap=True), 0),
    "from_one": ("positions counted from 1 instead of 0", "Use torch.arange(max_len): the first row is "
                 "position 0.", formula, 1),
    "exponent_i": ("the exponent i/d_model instead of 2i/d_model (pair index without the 2)",
                   "Pair i uses 10000^(2i/d_model); torch.arange(0, d_model, 2) gives 2i directly.",
                   partial(formula, exponent=1.0), 0),
    "exponent_4i": ("the exponent 4i/d_model: the column index 2i doubled again",
                    "torch.arange(0, d_model, 2) already is 2i: do not multiply it by 2.",
                    partial(formula, exponent=4.0), 0),
    "cos_column": ("the cosine's exponent taken from its own column index: (2i+1)/d_model instead of "
                   "2i/d_model", "The sine in column 2i and the cosine in column 2i+1 share one angle, "
                   "pos / 10000^(2i/d_model).", partial(formula, cos_column=True), 0),
    "inverted": ("10000^(2i/d_model) inverted: the angle pos * 10000^(2i/d_model)",
                 "Divide the position by 10000^(2i/d_model).", partial(formula, inverted=True), 0),
    "halves": ("the sines and cosines in two halves [sin ... sin, cos ... cos] instead of interleaved pairs",
               "Interleave them: pe[:, 0::2] = sin, pe[:, 1::2] = cos.", halves_formula, 0),
}


def encoding_mistakes(positions, d_model: int) -> dict[str, Mistake]:
    return {name: Mistake(description, hint, partial(table, entry, positions, d_model, start))
            for name, (description, hint, entry, start) in ENCODING_MISTAKES.items()}


def property_hint(pe: torch.Tensor, d_model: int) -> str | None:
    """Which property of a table (rows = positions 0, 1, ...) breaks first, when no mistake fits."""
    pe = pe.detach().double()
    if pe.shape[0] == 0 or not torch.isfinite(pe).all():
        return None
    row0 = torch.tensor([0.0, 1.0] * d_model, dtype=torch.float64)[:d_model]
    if not torch.allclose(pe[0], row0, atol=1e-5):
        return ("Row 0 is position 0: sin(0) = 0 in the even columns and cos(0) = 1 in the odd "
                "columns. Count positions from 0 and put the sine in column 2i, the cosine in 2i+1.")
    pairs = d_model // 2
    radius = pe[:, 0:2 * pairs:2] ** 2 + pe[:, 1:2 * pairs:2] ** 2  # (positions, pairs)
    bad = ((radius - 1).abs() > 1e-4).any(dim=0)
    if bad.any():
        i = int(torch.nonzero(bad)[0])
        return (f"Columns {2 * i} and {2 * i + 1} should be the sine and cosine of the same angle "
                f"(sin² + cos² = 1), but for pair i={i} they are not.")
    return ("Check the frequency of each pair: the angle of pair i grows by 1 / 10000^(2i / d_model) "
            "per position.")


ENCODING_CASES = [(6, 8), (9, 7), (5, 3), (1, 4), (50, 2), (100, 64), (2000, 17)]  # max_len, d_model


@instant
def check_sinusoidal_positional_encoding(sinusoidal_positional_encoding) -> None:
    """Shape, dtype and sampled entries against the formula; odd d_model; 2000 positions."""
    for max_len, d_model in ENCODING_CASES:
        case = f"max_len={max_len}, d_model={d_model}" + (" (odd)" if d_model % 2 else "")
        what = f"sinusoidal_positional_encoding({max_len}, {d_model})"
        try:
            pe = run_learner("sinusoidal_positional_encoding", case, sinusoidal_positional_encoding,
                             max_len, d_model)
        except VisibleCheckFailure as failure:
            if d_model % 2:
                raise VisibleCheckFailure(
                    f"{failure}\nWith an odd d_model there is one more even column (sine) than odd "
                    "columns (cosine): the cosines use only the first d_model // 2 angles.") from failure
            raise
        check_shape(check_tensor(pe, what), (max_len, d_model), what, case)
        if pe.dtype != torch.float32:
            raise VisibleCheckFailure(f"{what} should be float32, not {pe.dtype}: compute in float64 if "
                                      "you like, then convert at the end with .float().")
        positions = sampled_positions(max_len, d_model)
        if len(positions) < max_len:
            case += f"; rows {', '.join(map(str, positions))} checked"
        try:
            check_close(pe.detach().double()[positions], table(formula, positions, d_model), what, case,
                        rtol=1e-6, atol=angle_tolerance(max_len), against=FORMULA,
                        mistakes=encoding_mistakes(positions, d_model))
        except VisibleCheckFailure as failure:
            hint = None if "looks like" in str(failure) else property_hint(pe[:4], d_model)
            raise VisibleCheckFailure(str(failure) + (f"\n{hint}" if hint else "")) from None
    passed("sinusoidal_positional_encoding follows the formula, for odd d_model and 2000 positions too.")


# ---------------------------------------------------------------- the module

BUFFER_HOW = ("Compute the encoding once in __init__ and keep it with self.register_buffer('pe', "
              "sinusoidal_positional_encoding(max_len, d_model)): a buffer follows .to(device) and "
              "state_dict() but is not a trained parameter.")
MODULE_CASES = [  # name, B, n, d_model, max_len (None: the default), dtype
    ("B=2, n=5, d_model=8, max_len=12", 2, 5, 8, 12, torch.float32),
    ("n equal to max_len", 3, 7, 6, 7, torch.float32),
    ("odd d_model=5, the default max_len", 2, 4, 5, None, torch.float32),
    ("one position, float64", 2, 1, 4, 3, torch.float64),
]


def check_buffer(module: nn.Module, max_len: int, d_model: int) -> None:
    """The encoding is a registered, persistent buffer pe of shape (max_len, d_model)."""
    if "pe" in dict(module.named_parameters()):
        raise VisibleCheckFailure("PositionalEncoding: pe is an nn.Parameter, so the optimiser would "
                                  "train it. " + BUFFER_HOW)
    buffers = dict(module.named_buffers())
    if "pe" not in buffers:
        raise VisibleCheckFailure("PositionalEncoding has no registered buffer called pe. " + BUFFER_HOW)
    if "pe" not in module.state_dict():
        raise VisibleCheckFailure("PositionalEncoding: pe is registered with persistent=False, so it is "
                                  "not saved in state_dict(). Register it as a normal buffer.")
    if tuple(buffers["pe"].shape) != (max_len, d_model):
        raise VisibleCheckFailure(
            f"PositionalEncoding: the buffer pe should have shape (max_len, d_model) = {(max_len, d_model)}, "
            f"but has shape {tuple(buffers['pe'].shape)}. Keep it 2-D and slice pe[:n] in forward.")


def _added(module_call, B, n, d, dtype, seed):
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    return with_gradients(lambda: (module_call(x),), ("output",), {"x": x}, seed)


def _plus(entry, n, d, start=0, scale=1.0):
    pe = table(entry, range(n), d, start)
    return lambda x: x * scale + pe.to(x.dtype)


@instant
def check_PositionalEncoding(PositionalEncoding) -> None:
    """The pe buffer, x + pe[:n] against the formula, the ValueError, and dropout."""
    for seed, (case, B, n, d, max_len, dtype) in enumerate(MODULE_CASES):
        args = (d,) if max_len is None else (d, max_len)
        module = run_learner("PositionalEncoding", case, PositionalEncoding, *args)
        if not isinstance(module, nn.Module):
            raise VisibleCheckFailure("PositionalEncoding(...) should create an nn.Module.")
        check_buffer(module, 5000 if max_len is None else max_len, d)
        module = module.to(dtype)

        def learner(x, case=case, module=module):
            return check_tensor(run_learner("PositionalEncoding", case, module, x),
                                "PositionalEncoding's output")

        mistakes = {
            "scaled": Mistake("x multiplied by sqrt(d_model) before adding pe",
                              "PositionalEncoding only adds pe[:n]; scaling the embeddings belongs to "
                              "the model (10.6).", partial(_added, _plus(formula, n, d, scale=math.sqrt(d)),
                                                           B, n, d, dtype, seed)),
            "from_one": Mistake("the encoding of positions 1 .. n instead of 0 .. n-1",
                                "Add pe[:n]: the first token is at position 0.",
                                partial(_added, _plus(formula, n, d, start=1), B, n, d, dtype, seed)),
            "swapped": Mistake("sine and cosine swapped", "Even columns 2i hold the sine.", partial(
                _added, _plus(partial(formula, swap=True), n, d), B, n, d, dtype, seed)),
        }
        atol = angle_tolerance(n)
        got, want = _added(learner, B, n, d, dtype, seed), _added(_plus(formula, n, d), B, n, d, dtype, seed)
        for key in want:
            check_close(got[key], want[key], "PositionalEncoding(x)" if key == "output" else key, case,
                        rtol=1e-6, atol=atol, against="x + pe[:n] from the formula",
                        mistakes={k: Mistake(m.description, m.hint, lambda m=m, key=key: m.run()[key])
                                  for k, m in mistakes.items()})
    expect_value_error("PositionalEncoding", lambda: PositionalEncoding(8, max_len=6)(torch.zeros(2, 7, 8)),
                       "when x has n=7 positions but max_len=6")
    _check_dropout(PositionalEncoding)
    passed("PositionalEncoding keeps pe as a buffer, adds pe[:n], applies dropout and rejects long inputs.")


def _check_dropout(PositionalEncoding) -> None:
    """dropout(x + pe[:n]): off in eval(); in train() every entry 0 or 2·(x + pe)."""
    module = run_learner("PositionalEncoding", "dropout=0.5", PositionalEncoding, 8, max_len=50, dropout=0.5)
    x = torch.ones(4, 50, 8)
    want = x + table(formula, range(50), 8).float()
    atol = angle_tolerance(50)
    with torch.no_grad():
        module.eval()
        if not close(run_learner("PositionalEncoding", "dropout=0.5, eval()", module, x), want, 1e-6, atol):
            raise VisibleCheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in eval() mode should "
                                      "return x + pe[:n]: use nn.Dropout (a module, off in eval mode), not "
                                      "F.dropout(..., training=True).")
        module.train()
        out = run_learner("PositionalEncoding", "dropout=0.5, train()", module, x)
    dropped = out.abs() <= atol
    kept = (out - 2 * want).abs() <= 2 * atol
    if not bool((dropped | kept).all()) or not bool(dropped.any()):
        raise VisibleCheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in train() mode should "
                                  "apply dropout to the sum: every entry 0 or 2·(x + pe). Return "
                                  "self.dropout(x + pe[:n]).")


# ---------------------------------------------------------------- the shift matrix

SHIFT_CASES = [(1, 8), (3, 16), (0, 8), (-2, 8), (1, 2), (37, 6), (100, 64)]  # k, d_model


def shift_positions(k: int) -> list[int]:
    """Positions pos (pos + k >= 0) near the start and near 10 000, far beyond any max_len."""
    return [p for p in [*range(0, 40), *range(9_960, 10_001)] if p + k >= 0]


def shift_hint(M: torch.Tensor, k: int, d_model: int) -> str | None:
    """Name the mistake from the angles of M's 2x2 blocks (no reference matrix needed)."""
    M = M.detach().double()
    pairs = range(d_model // 2)
    off_pairs = sum(float(M[2 * i, 2 * i + 1].abs() + M[2 * i + 1, 2 * i].abs()) for i in pairs)
    halves = sum(float(M[i, i + d_model // 2].abs()) for i in pairs)
    if k and off_pairs < 1e-9 < halves:
        return ("This looks like blocks pairing column i with column i + d_model/2 (the halves layout). "
                "The encoding interleaves its pairs: columns 2i and 2i+1.")
    angles = [math.atan2(float(M[2 * i, 2 * i + 1]), float(M[2 * i, 2 * i])) for i in pairs]

    def turns(step):  # would the block angles be k * step(i)?
        return all(abs(math.remainder(a - k * step(i), 2 * math.pi)) < 1e-4 for i, a in zip(pairs, angles))

    candidates = [
        (lambda i: -(10000.0 ** (-2 * i / d_model)),
         "the rotation transposed: the signs of the sine terms swapped (a shift by -k)",
         "Row 2i (the sine) is [.. cos(k w_i), +sin(k w_i) ..], row 2i+1 (the cosine) is "
         "[.. -sin(k w_i), cos(k w_i) ..]."),
        (lambda i: 10000.0 ** (-i / d_model), "the exponent i/d_model instead of 2i/d_model in omega_i",
         "omega_i = 1 / 10000^(2i/d_model), as in the encoding."),
        (lambda i: 10000.0 ** (-4 * i / d_model), "the exponent 4i/d_model: the index 2i doubled again",
         "torch.arange(0, d_model, 2) already is 2i."),
        (lambda i: 10000.0 ** (2 * i / d_model), "omega_i inverted (10000^(+2i/d_model))",
         "omega_i = 1 / 10000^(2i/d_model)."),
        (lambda i: 1.0, "every block rotated by the same angle k",
         "Pair i turns by k·omega_i: each block has its own frequency."),
    ]
    for step, description, hint in candidates:
        if k and turns(step) and not turns(lambda i: 10000.0 ** (-2 * i / d_model)):
            return f"This looks like {description}. {hint}"
    return None


@instant
def check_relative_shift_matrix(relative_shift_matrix) -> None:
    """M @ pe[pos] == pe[pos + k] for positions up to 10 000, several k (negative too); ValueError."""
    for k, d_model in SHIFT_CASES:
        case = f"k={k}, d_model={d_model}"
        what = f"relative_shift_matrix({k}, {d_model})"
        M = check_tensor(run_learner("relative_shift_matrix", case, relative_shift_matrix, k, d_model), what)
        if not M.is_floating_point():
            raise VisibleCheckFailure(f"{what} should be a floating-point matrix (float32), not {M.dtype}.")
        check_shape(M, (d_model, d_model), what, case)
        positions = shift_positions(k)
        moved = table(formula, positions, d_model) @ M.detach().double().T  # row j: (M @ pe[pos_j])^T
        try:
            check_close(moved, table(formula, positions, d_model, start=k), f"M @ pe[pos] for k={k}", case,
                        rtol=1e-6, atol=2 * angle_tolerance(abs(k) + 1),
                        against="pe[pos + k] (positions up to 10 000)")
        except VisibleCheckFailure as failure:
            hint = shift_hint(M, k, d_model)
            raise VisibleCheckFailure(str(failure) + (f"\n{hint}" if hint else "")) from None
    expect_value_error("relative_shift_matrix", lambda: relative_shift_matrix(1, 7), "for an odd d_model=7")
    passed("relative_shift_matrix moves the encoding by k positions, backwards too, up to position 10 000.")


# ---------------------------------------------------------------- rotary position embedding

ROTARY_CASES = [  # name, shape of x, positions (None: 0 .. n-1), base (None: the default), dtype
    ("3-D x (B=2, n=5, d=8), float32", (2, 5, 8), None, None, torch.float32),
    ("2-D x (n=6, d=4)", (6, 4), None, None, torch.float64),
    ("4-D x (B=2, h=3, n=4, d=6)", (2, 3, 4, 6), None, None, torch.float64),
    ("d=2 (one pair)", (3, 7, 2), None, None, torch.float64),
    ("explicit positions [7, 0, 3, 3, 12]", (2, 5, 8), [7, 0, 3, 3, 12], None, torch.float64),
    ("base=500", (2, 4, 8), None, 500.0, torch.float64),
    ("positions up to 4000, float32", (2, 6, 16), [0, 1, 999, 1000, 3998, 3999], None, torch.float32),
]
PROBES = ("even", "odd")  # (1, 0, 1, 0, ...) and (0, 1, 0, 1, ...) at every token


def turned_probe(p: float, column: int, d: int, base: float, probe: str, *, halves: bool = False,
                 direction: float = 1.0, exponent: float = 2.0, inverted: bool = False, swap: bool = False,
                 added: bool = False) -> float:
    """Entry ``column`` of a probe token at position p after the rotation: the probe "even"
    puts the point (1, 0) in every pair, "odd" the point (0, 1); they should come out as
    (cos, sin) and (-sin, cos) of p * base^(-2i/d). The keywords switch on known mistakes
    (``halves``: pairs of column i and i + d/2; ``direction=-1``: clockwise; ``exponent``,
    ``inverted``: other frequencies; ``swap``: cos and sin exchanged; ``added``: the
    sinusoidal table added instead of a rotation)."""
    def x(j: int) -> float:
        return float((j % 2 == 0) == (probe == "even"))

    half = d // 2
    i, first = (column % half, column < half) if halves else (column // 2, column % 2 == 0)
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


ROTARY_MISTAKES = {  # name: (description, hint, switches of probe_images)
    "halves": ("pairs made of column i and column i + d/2 (the 'rotate_half' layout of some libraries)",
               "This notebook pairs neighbouring columns, like the sinusoidal table: (x[..., 2i], "
               "x[..., 2i+1]), that is x[..., 0::2] with x[..., 1::2].", {"halves": True}),
    "clockwise": ("each pair turned clockwise (the signs of the sine terms swapped)",
                  "Counter-clockwise: (a, b) -> (a cos - b sin, a sin + b cos).", {"direction": -1.0}),
    "exponent_i": ("the exponent i/d instead of 2i/d (pair index without the 2)",
                   "Pair i turns by p * base^(-2i/d); torch.arange(0, d, 2) gives 2i directly.",
                   {"exponent": 1.0}),
    "exponent_4i": ("the exponent 4i/d: the column index 2i doubled again",
                    "torch.arange(0, d, 2) already is 2i: do not multiply it by 2.", {"exponent": 4.0}),
    "inverted": ("the frequency inverted: the angle p * base^(+2i/d)",
                 "Pair i turns by p / base^(2i/d): the first pair fastest, the last slowest.",
                 {"inverted": True}),
    "from_one": ("positions counted from 1 instead of 0", "Without positions, token j is at position "
                 "j = 0, 1, ..., n-1: the first token is not rotated at all.", {"start": 1}),
    "positions_ignored": ("the positions argument ignored (always 0 .. n-1)",
                          "When positions is given, token j is at position positions[j].",
                          {"ignore_positions": True}),
    "base_ignored": ("the base argument ignored (always 10000)", "Use base in the frequencies: "
                     "base^(-2i/d).", {"base": 10000.0}),
    "swapped": ("cosine and sine exchanged: (a sin - b cos, a cos + b sin)",
                "The cosine multiplies the coordinate itself: (a cos - b sin, a sin + b cos).",
                {"swap": True}),
    "added": ("the sinusoidal encoding added to x instead of rotating x", "Rotary embedding multiplies: "
              "each pair (a, b) becomes (a cos - b sin, a sin + b cos), so its length stays the same.",
              {"added": True}),
}


def rotary_mistakes(shape, positions, base: float) -> dict[str, Mistake]:
    def images(switch):
        switch = dict(switch)
        where = range(shape[-2]) if switch.pop("ignore_positions", False) else positions
        return lambda: probe_images(shape, where, switch.pop("base", base), **switch)

    return {name: Mistake(description, hint, images(switch))
            for name, (description, hint, switch) in ROTARY_MISTAKES.items()}


def _call_rotary(apply_rotary, x, positions, base, case) -> torch.Tensor:
    """apply_rotary(x[, positions][, base=...]) as the case gives them; shape and dtype checked."""
    args = (x,) if positions is None and base is None else (x, positions)
    out = run_learner("apply_rotary", case, apply_rotary, *args, **({} if base is None else {"base": base}))
    check_shape(check_tensor(out, "apply_rotary's result"), x.shape, "apply_rotary(x) (the shape of x)", case)
    if out.dtype != x.dtype:
        raise VisibleCheckFailure(f"apply_rotary should return the dtype of x ({x.dtype}) in case "
                                  f"'{case}', but returned {out.dtype}: convert the cosines and sines with "
                                  ".to(x.dtype) (or build them in x.dtype).")
    return out


MIXED = ("The points (1, 0) and (0, 1) come out right, but this x does not: every token must be turned "
         "on its own, by the angle of its own position, whatever the leading dimensions (batch, heads) "
         "are. Work on the last two axes of x, (..., n, d), and keep the others as they are.")
GRADIENT = ("The values are right but the gradient is not. The gradient of a rotation is the output's "
            "gradient turned back, R(-p w_i): build the result from x with differentiable tensor "
            "operations (a hand-written backward must turn back, not forward).")


def pair_sums(t: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (..., d/2): the sum of each pair (columns 2i and 2i+1)."""
    return t[..., 0::2] + t[..., 1::2]


def rotary_hint(apply_rotary, images: torch.Tensor) -> str | None:
    """A property the learner's rotation breaks, when no known mistake matches: the length of
    each pair, or a score that depends on the offset m - n only."""
    images = images.detach().double()
    if not torch.isfinite(images).all():
        return None
    if not close(pair_sums(images ** 2), torch.ones_like(pair_sums(images)), 1e-4, 1e-4):
        return ("The length of each pair (x[..., 2i], x[..., 2i+1]) should not change (a rotation), but it "
                "does: new a = a cos - b sin, new b = a sin + b cos, with the old a and b on both lines.")
    q, k = seeded(1, 8, seed=41).double().repeat(12, 1), seeded(1, 8, seed=42).double().repeat(12, 1)
    try:
        scores = apply_rotary(q) @ apply_rotary(k).T  # (12, 12): the query at m, the key at n
    except Exception:  # noqa: BLE001 - learner code; the failure is reported already
        return None
    if not close(scores[1:, 1:], scores[:-1, :-1], 1e-6, 1e-6):
        return ("The score of the rotated query at position m and the rotated key at n should depend only on "
                "m - n, but it changes along a diagonal: turn every pair by an angle proportional to the "
                "position, p * base^(-2i/d).")
    return None


@instant
def check_apply_rotary(apply_rotary) -> None:
    """Every pair's points (1, 0) and (0, 1) turned by p * base^(-2i/d) (the formula, entry by
    entry), any x a combination of them pair by pair, and the gradient turned back; 2-D to 4-D,
    given positions, another base, float32 up to position 4000; the ValueError."""
    for seed, (case, shape, given, base, dtype) in enumerate(ROTARY_CASES):
        positions = None if given is None else torch.tensor(given)
        at = given or list(range(shape[-2]))
        x = seeded(*shape, seed=seed, dtype=dtype).requires_grad_()
        out = _call_rotary(apply_rotary, x, positions, base, case)
        with torch.no_grad():  # (2, *shape): what the probes become
            images = torch.stack([_call_rotary(apply_rotary, probe_input(shape, probe, dtype), positions,
                                               base, case) for probe in PROBES])
        atol = angle_tolerance(max(at))  # grows with the largest position, as in grading
        try:
            check_close(images, probe_images(shape, at, base or 10000.0), "apply_rotary of the points (1, 0) "
                        "and (0, 1) of every pair", case, rtol=1e-6, atol=2 * atol,
                        against="(cos, sin) and (-sin, cos) of p * base^(-2i/d)",
                        mistakes=rotary_mistakes(shape, at, base or 10000.0))
        except VisibleCheckFailure as failure:
            hint = None if "looks like" in str(failure) else rotary_hint(apply_rotary, images)
            raise VisibleCheckFailure(str(failure) + (f"\n{hint}" if hint else "")) from None
        a, b = (x.detach()[..., j::2].double().repeat_interleave(2, dim=-1) for j in (0, 1))
        combined = a * images[0].double() + b * images[1].double()  # a·R(1, 0) + b·R(0, 1), pair by pair
        try:
            check_close(out.detach().double(), combined, "apply_rotary(x)", case, rtol=1e-6,
                        atol=atol * (1 + float(combined.abs().max())),
                        against="a times the turned (1, 0) plus b times the turned (0, 1), for every pair "
                        "(a, b) of x (a rotation is linear)")
        except VisibleCheckFailure as failure:
            raise VisibleCheckFailure(f"{failure}\n{MIXED}") from None
        _check_rotary_gradient(x, out, images, atol, case, seed)
    expect_value_error("apply_rotary", lambda: apply_rotary(torch.zeros(2, 3, 5)), "for an odd d=5")
    passed("apply_rotary turns every pair by p·w_i, so the score of q and k depends only on their offset.")


def _check_rotary_gradient(x, out, images, atol: float, case: str, seed: int) -> None:
    """The gradient of sum(out * g) is g turned back: pair i gets (g·R(1, 0), g·R(0, 1))."""
    if not out.requires_grad:
        raise VisibleCheckFailure(
            "apply_rotary's result carries no gradient although x requires one: a model could not learn "
            "through it. Remove any .detach(), torch.no_grad() or torch.tensor(...) that rebuilds the "
            "result.")
    g = seeded(*x.shape, seed=seed + 7919, dtype=x.dtype)
    (out * g).sum().backward()
    grad = x.grad if x.grad is not None else torch.zeros_like(x)
    g, images = g.double(), images.double()
    want = torch.stack([pair_sums(g * images[0]), pair_sums(g * images[1])], dim=-1).flatten(-2)
    try:
        check_close(grad.double(), want, "the gradient of apply_rotary(x)", case, rtol=1e-6,
                    atol=atol * (1 + float(want.abs().max())),
                    against="the output's gradient turned back (the transpose of a rotation)")
    except VisibleCheckFailure as failure:
        raise VisibleCheckFailure(f"{failure}\n{GRADIENT}") from None
