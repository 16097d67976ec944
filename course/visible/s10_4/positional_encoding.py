"""Visible check of ``PositionalEncoding(d_model, max_len=5000, dropout=0.0)``, and its known mistakes."""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    angle_tolerance,
    call_learner,
    check_unplaced_tensors,
    close,
    compare_outputs,
    expect_tensor,
    expect_value_error,
    passed,
    seeded,
    visible_check,
    with_gradients,
)
from course.visible.s10_4.sinusoidal_positional_encoding import FROM_ONE, SWAPPED, formula, table

HOW = ("Compute the encoding once in __init__ and keep it with self.register_buffer('pe', "
       "sinusoidal_positional_encoding(max_len, d_model)): a buffer follows .to(device) and "
       "state_dict() but is not a trained parameter.")
SCALED = Mistake("scaled", "x multiplied by sqrt(d_model) before adding pe",
                 "PositionalEncoding only adds pe[:n]; scaling the embeddings by sqrt(d_model) belongs to "
                 "the embedding layer (10.6).")
AGAINST = {"output": "x + pe[:n] from the formula", "grad x": "the gradient of x + pe[:n]"}
TOO_LONG = "when x has n=7 positions but max_len=6"
CASES = [  # name, B, n, d_model, max_len (None: the default), dtype
    ("B=2, n=5, d_model=8, max_len=12", 2, 5, 8, 12, torch.float32),
    ("n equal to max_len", 3, 7, 6, 7, torch.float32),
    ("odd d_model=5, the default max_len", 2, 4, 5, None, torch.float32),
    ("one position, float64", 2, 1, 4, 3, torch.float64),
]


def expect_buffer(module: nn.Module, max_len: int, d_model: int) -> None:
    """The encoding is a registered, persistent buffer pe of shape (max_len, d_model)."""
    if "pe" in dict(module.named_parameters()):
        raise CheckFailure("PositionalEncoding: pe is an nn.Parameter, so the optimiser would train it. "
                           + HOW)
    buffers = dict(module.named_buffers())
    if "pe" not in buffers:
        raise CheckFailure("PositionalEncoding has no registered buffer called pe. " + HOW)
    if "pe" not in module.state_dict():
        raise CheckFailure("PositionalEncoding: pe is registered with persistent=False, so it is not saved "
                           "in state_dict(). Register it as a normal (persistent) buffer.")
    if tuple(buffers["pe"].shape) != (max_len, d_model):
        raise CheckFailure(
            f"PositionalEncoding: the buffer pe should have shape (max_len, d_model) = {(max_len, d_model)}, "
            f"but has shape {tuple(buffers['pe'].shape)}. Keep it 2-D and slice pe[:n] in forward.")


def expect_dropout(make, call, pe: torch.Tensor) -> None:
    """dropout(x + pe[:n]) of ``make()`` (d_model=8, max_len=50, dropout=0.5), ``pe`` its (50, 8) table:
    off in eval(); in train() every entry 0 or 2·(x + pe). ``call(where, module, x)`` runs it."""
    module = make()
    x = torch.ones(4, 50, 8)
    want = x + pe.float()
    atol = angle_tolerance(50)
    with torch.no_grad():
        module.eval()
        if not close(call("dropout=0.5, eval()", module, x), want, 1e-6, atol):
            raise CheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in eval() mode should return "
                               "x + pe[:n]: use nn.Dropout (a module, off in eval mode), not "
                               "F.dropout(..., training=True).")
        module.train()
        out = call("dropout=0.5, train()", module, x)
    dropped = out.abs() <= atol
    kept = (out - 2 * want).abs() <= 2 * atol
    if not bool((dropped | kept).all()) or not bool(dropped.any()):
        raise CheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in train() mode should apply "
                           "dropout to the sum: every entry 0 or 2·(x + pe). Return "
                           "self.dropout(x + pe[:n]).")


def _added(module_call, B, n, d, dtype, seed):
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    return with_gradients(lambda: (module_call(x),), ("output",), {"x": x}, seed)


def _plus(entry, n, d, start=0, scale=1.0):
    pe = table(entry, range(n), d, start)
    return lambda x: x * scale + pe.to(x.dtype)


@visible_check
def check_PositionalEncoding(PositionalEncoding) -> None:
    """The pe buffer, x + pe[:n] against the formula, the ValueError, and dropout."""
    for seed, (case, B, n, d, max_len, dtype) in enumerate(CASES):
        where = f"case '{case}'"
        args = (d,) if max_len is None else (d, max_len)
        module = call_learner("PositionalEncoding", where, PositionalEncoding, *args)
        if not isinstance(module, nn.Module):
            raise CheckFailure("PositionalEncoding(...) should create an nn.Module.")
        expect_buffer(module, 5000 if max_len is None else max_len, d)
        module = module.to(dtype)

        def learner(x, where=where, module=module):
            return expect_tensor(call_learner("PositionalEncoding", where, module, x),
                                 "PositionalEncoding's output")

        spec = (B, n, d, dtype, seed)
        variants = {SCALED: partial(_added, _plus(formula, n, d, scale=math.sqrt(d)), *spec),
                    FROM_ONE: partial(_added, _plus(formula, n, d, start=1), *spec),
                    SWAPPED: partial(_added, _plus(partial(formula, swap=True), n, d), *spec)}
        compare_outputs(_added(learner, *spec), _added(_plus(formula, n, d), *spec), "PositionalEncoding(x)",
                       where, atol=angle_tolerance(n), against=AGAINST, variants=variants)
    expect_value_error("PositionalEncoding", lambda: PositionalEncoding(8, max_len=6)(torch.zeros(2, 7, 8)),
                       TOO_LONG)
    expect_dropout(lambda: call_learner("PositionalEncoding", "dropout=0.5", PositionalEncoding, 8,
                                        max_len=50, dropout=0.5),
                   lambda where, module, x: call_learner("PositionalEncoding", where, module, x),
                   table(formula, range(50), 8))
    probe = call_learner("PositionalEncoding", "PositionalEncoding(8, 20)", PositionalEncoding, 8, 20)
    x = torch.ones(2, 5, 8)
    check_unplaced_tensors("PositionalEncoding", lambda: probe(x))
    passed("PositionalEncoding keeps pe as a buffer, adds pe[:n], applies dropout and rejects long inputs.")
