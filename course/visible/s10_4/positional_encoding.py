"""``PositionalEncoding(d_model, max_len=5000, dropout=0.0)``: the exercise (inputs, the formula's
table as the reference, known mistakes, visible cases) and its visible check."""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    angle_tolerance,
    close,
    compare_outputs,
    expect_tensor,
    expect_value_error,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.visible.s10_4.sinusoidal_positional_encoding import FROM_ONE, SWAPPED, formula, table

HOW = ("Compute the table once in __init__ with sinusoidal_positional_encoding and keep it as a "
       "registered buffer named pe (nn.Module.register_buffer): a buffer follows .to(device) and "
       "state_dict() but is not a trained parameter.")
SCALED = Mistake("scaled", "x multiplied by sqrt(d_model) before adding pe",
                 "PositionalEncoding only adds pe[:n]; scaling the embeddings by sqrt(d_model) belongs to "
                 "the embedding layer (10.6).")
AGAINST = {"output": "x + pe[:n] from the formula", "grad x": "the gradient of x + pe[:n]"}
TOO_LONG = "when x has n=7 positions but max_len=6"


def cases(seed: int, dtype=torch.float64) -> list[Case]:
    """x (B, n, d_model) and max_len (None: the default 5000) of the cases."""
    shapes = [("B=2, n=5, d_model=8, max_len=12", (2, 5, 8), 12, "max_len given"),
              ("n equal to max_len", (3, 7, 6), 7, "n equal to max_len"),
              ("odd d_model=5, the default max_len", (2, 4, 5), None, "odd d_model, the default max_len"),
              ("one position", (2, 1, 4), 3, "one position")]
    return [Case(name, seed + i, {"dims": dims, "max_len": max_len}, dtype, kind=kind)
            for i, (name, dims, max_len, kind) in enumerate(shapes)]


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
    if close(out, want, 1e-6, atol):
        raise CheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in train() mode returns "
                           "x + pe[:n] unchanged: no dropout at all. The dropout argument should make "
                           "a dropout module that acts on the sum in training mode.")
    if not bool((dropped | kept).all()) or not bool(dropped.any()):
        raise CheckFailure("PositionalEncoding(8, max_len=50, dropout=0.5) in train() mode should apply "
                           "dropout to the sum: every entry 0 or 2·(x + pe). Apply the dropout module to "
                           "x + pe[:n], not to x or pe alone.")


def added(case: Case, device, entry=formula, start: int = 0, scale: float = 1.0):
    """x * scale + the table of ``entry`` (the formula, or a known mistake's) from ``start``, with
    the gradient of x."""
    x = randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()
    _, n, d = case.params["dims"]
    pe = table(entry, range(n), d, start).to(device, case.dtype)
    return with_gradients(lambda: (x * scale + pe,), ("output",), {"x": x}, case.seed)


class PositionalEncodingModule(Exercise):
    name = "PositionalEncoding"
    reference_name = AGAINST["output"]
    mistakes = {SCALED: lambda case, device: added(case, device, scale=math.sqrt(case.params["dims"][2])),
                FROM_ONE: partial(added, start=1), SWAPPED: partial(added, entry=partial(formula, swap=True))}
    visible_cases = [*cases(0, torch.float32)[:3], *cases(3)[3:]]

    def run(self, impl, case, device):
        d, max_len = case.params["dims"][2], case.params["max_len"]
        module = self.build(impl, case, *((d,) if max_len is None else (d, max_len)))
        expect_buffer(module, 5000 if max_len is None else max_len, d)
        module = module.to(device)
        x = randn(case.params["dims"], generator(case.seed), case.dtype, device).requires_grad_()

        def call():
            return (expect_tensor(self.call(case, module, x), f"{self.name}.forward's result", case),)

        return with_gradients(call, ("output",), {"x": x}, case.seed)

    def reference(self, case, device):
        return added(case, device)

    def evaluate(self, case, got, device):
        compare_outputs(got, self.expected(case, device), self.name, str(case),
                        atol=angle_tolerance(case.params["dims"][1]), against=AGAINST,
                        variants={m: partial(run, case, device) for m, run in self.mistakes.items()})

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, max_len=6)(torch.zeros(2, 7, 8)), TOO_LONG)
        expect_dropout(lambda: self.call("dropout=0.5", impl, 8, max_len=50, dropout=0.5),
                       lambda where, module, x: self.call(where, module, x), table(formula, range(50), 8))


@visible_check
def check_PositionalEncoding(PositionalEncoding) -> None:
    """The pe buffer, x + pe[:n] against the formula, the ValueError, and dropout."""
    PositionalEncodingModule().run_cases(PositionalEncoding)
    passed("PositionalEncoding keeps pe as a buffer, adds pe[:n], applies dropout and rejects long inputs.")
