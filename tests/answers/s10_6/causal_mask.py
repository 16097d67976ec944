"""causal_mask: right answers written differently, and planted bugs."""

import torch
from torch import nn

from course.checking import pieces
from course.visible.s10_6.causal_mask import INVERTED, NO_DIAGONAL, UPPER
from tests.answers import bug, right

EXERCISE = "causal_mask"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'comparisons, triangles and sorts a right answer runs too'


def causal_arange(n, device=None):
    """A right answer: compare positions."""
    i = torch.arange(n, device=device)
    return i[:, None] >= i[None, :]


def causal_not_triu(n, device=None):
    """A right answer: the complement of the strict upper triangle."""
    return ~torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def causal_float_compare(n, device=None):
    """A right answer: a float lower triangle, compared with 1."""
    return torch.tril(torch.ones(n, n, device=device)) == 1


def ignores_device(n, device=None):
    """The Annotated Transformer's subsequent_mask (True = may attend): on the CPU whatever device says."""
    return torch.ones(n, n, dtype=torch.bool).tril()


def pytorch_mask_inverted(n, device=None):
    """The mask the check compares with, called: no credit, on both sides."""
    return nn.Transformer.generate_square_subsequent_mask(n, device=device) == 0


def answers(solution):
    return [
        right("solution", solution["causal_mask"]),
        right("causal_arange", causal_arange),
        right("causal_not_triu", causal_not_triu),
        right("causal_float_compare", causal_float_compare),
        bug("no diagonal", lambda n, device=None: torch.ones(n, n, device=device).tril(-1).bool(),
            hidden=r"without its diagonal", mistake=NO_DIAGONAL),
        bug("inverted", lambda n, device=None: torch.ones(n, n, device=device).triu(1).bool(),
            hidden=r"inverted", mistake=INVERTED),
        bug("upper", lambda n, device=None: torch.ones(n, n, device=device).triu().bool(),
            hidden=r"upper-triangular", mistake=UPPER),
        bug("float mask", lambda n, device=None: torch.ones(n, n, device=device).tril(),
            hidden=r"bool tensor.*the triangle of ones with dtype=torch\.bool"),
        bug("ignores device", ignores_device, hidden=r"device"),
        bug("nn.Transformer's mask, inverted", pytorch_mask_inverted,
            hidden="No credit for causal_mask: it calls nn.Transformer.generate_square"),
        bug("the mask the checks stand in for it", pieces.causal_mask, hidden="No credit.*own checking code"),
        bug("batch axis", lambda n, device=None: torch.ones(1, n, n, dtype=torch.bool, device=device).tril(),
            hidden=r"shape \(5, 5\)|shape \(1, 1\)"),
    ]
