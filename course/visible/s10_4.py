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
