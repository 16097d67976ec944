"""Dropout of a 10.5 module, checked the same way on both sides: off in eval(), on in train()."""

from __future__ import annotations

from collections.abc import Callable

import torch

from course.checking import CheckFailure, close


def expect_dropout_modes(what: str, make: Callable, x: torch.Tensor, call: Callable) -> None:
    """With dropout=0.5: eval() gives the dropout-free output; train() changes it.

    ``make(dropout)`` builds the learner's module (the two modules share their weights);
    ``call(where, fn, *args)`` runs learner code.
    """
    plain = call("dropout=0.0", make, 0.0)
    dropping = call("dropout=0.5", make, 0.5)
    try:
        dropping.load_state_dict(plain.state_dict())
    except RuntimeError as error:
        raise CheckFailure(f"{what}: the module's parameters should not depend on the dropout rate "
                           f"({str(error).splitlines()[0]}).") from None
    with torch.no_grad():
        want = call("dropout=0.0, eval()", plain.eval(), x)
        got = call("dropout=0.5, eval()", dropping.eval(), x)
        if not close(got, want, 1e-5, 1e-6):
            raise CheckFailure(f"{what} with dropout=0.5 in eval() mode should give the same output as with "
                               "dropout=0.0: use nn.Dropout modules (off in eval mode), not "
                               "F.dropout(..., training=True).")
        if close(call("dropout=0.5, train()", dropping.train(), x), want, 1e-5, 1e-6):
            raise CheckFailure(f"{what} with dropout=0.5 in train() mode gives the dropout-free output: pass "
                               "the dropout argument to nn.Dropout and apply it.")
