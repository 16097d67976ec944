"""padding_mask: right answers written differently, and planted bugs."""

import torch

from course.visible.s10_6.padding_mask import FROM_LENGTHS, INVERTED, PAD_ZERO
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "padding_mask"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'comparisons, triangles and sorts a right answer runs too'


def padding_unsqueeze(tokens, pad_id):
    """A right answer: ne, then two unsqueezes."""
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)


def padding_view(tokens, pad_id):
    """A right answer: a view with the shape written out."""
    B, n = tokens.shape
    return (tokens != pad_id).view(B, 1, 1, n)


def padding_from_lengths(tokens, pad_id):
    """Wrong for left padding: assumes the padding is at the end."""
    lengths = (tokens != pad_id).sum(dim=1)
    keep = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


def answers(solution):
    return [
        right("solution", solution["padding_mask"]),
        right("padding_unsqueeze", padding_unsqueeze),
        right("padding_view", padding_view),
        bug("inverted", lambda t, p: (t == p)[:, None, None, :], hidden=r"inverted", mistake=INVERTED),
        bug("pad 0", lambda t, p: (t != 0)[:, None, None, :], hidden=r"ignores pad_id", mistake=PAD_ZERO),
        bug("(B, n)", lambda t, p: t != p, hidden=r"\(B, 1, 1, n\).*got|returned \(2, 5\)"),
        bug("(B, 1, n)", lambda t, p: (t != p)[:, None, :], hidden=r"returned \(2, 1, 5\)"),
        bug("queries", lambda t, p: (t != p)[:, None, :, None], hidden=r"hides \*keys\*"),
        bug("float", lambda t, p: (t != p).float()[:, None, None, :], hidden=r"bool tensor"),
        bug("lengths", padding_from_lengths, hidden=r"padding at the start", mistake=FROM_LENGTHS),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["padding_mask"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
