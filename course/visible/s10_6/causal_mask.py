"""Visible check of ``causal_mask(n, device=None)``, and its known mistakes."""

from __future__ import annotations

import torch
from torch import nn

from course.checking import Mistake, call_learner, compare_outputs, expect_shape, passed, visible_check
from course.checking.standins import expect_bool_mask

NO_DIAGONAL = Mistake("no_diagonal", "a mask without its diagonal (tril(diagonal=-1))",
                      "A token may attend to itself: keep the diagonal, torch.ones(n, n).tril() "
                      "(diagonal=0). "
                      "Without it the first token has nothing to attend to.")
INVERTED = Mistake("inverted", "the causal mask inverted (True above the diagonal)",
                   "True means *may attend*: query i may see keys 0..i, on and below the diagonal. "
                   "nn.Transformer's masks use the opposite polarity.")
UPPER = Mistake("upper", "an upper-triangular mask (triu): every token sees the future, not the past",
                "Use tril: row i (a query) is True in columns 0..i (the keys it may see).")
#: Each mistake as a float mask of size n.
WRONG = {NO_DIAGONAL: lambda n: torch.ones(n, n).tril(-1), INVERTED: lambda n: torch.ones(n, n).triu(1),
         UPPER: lambda n: torch.ones(n, n).triu()}


@visible_check
def check_causal_mask(causal_mask) -> None:
    """A bool (n, n) mask, True on and below the diagonal, as PyTorch's (inverted) mask says."""
    for n in (5, 2, 7, 1):
        case = f"case 'n={n}'"
        mask = expect_bool_mask(call_learner("causal_mask", case, causal_mask, n), f"causal_mask({n})", case)
        expect_shape(mask, (n, n), f"causal_mask({n})", case)
        theirs = nn.Transformer.generate_square_subsequent_mask(n) == 0  # PyTorch: 0 = may attend
        variants = {m: (lambda wrong=wrong, n=n: {"output": wrong(n).double()}) for m, wrong in WRONG.items()}
        compare_outputs({"output": mask.double()}, {"output": theirs.double()}, f"causal_mask({n})", case,
                        against="nn.Transformer.generate_square_subsequent_mask(n) == 0", variants=variants)
    mask = call_learner("causal_mask", "n=3, device='cpu'", causal_mask, 3, device=torch.device("cpu"))
    expect_shape(expect_bool_mask(mask, "causal_mask(3, device=...)"), (3, 3), "causal_mask(3, device=...)")
    passed("causal_mask lets each position see itself and the positions before it.")
