"""split_heads: right answers written differently, and planted bugs."""

import torch

from course.visible.s10_3.split_heads import NO_TRANSPOSE
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "split_heads"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def split_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_no_transpose(x, num_heads):
    B, n, d = x.shape
    return x.reshape(B, num_heads, n, d // num_heads)


def split_h_dh_swapped(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, d // num_heads, num_heads).transpose(1, 2)


def split_two_heads(x, num_heads):
    """num_heads ignored: always 2 heads."""
    B, n, d = x.shape
    return x.view(B, n, 2, d // 2).transpose(1, 2)


def split_detached(x, num_heads):
    B, n, d = x.shape
    return x.detach().view(B, n, num_heads, d // num_heads).transpose(1, 2)


def answers(solution):
    return [
        right("solution", solution["split_heads"]),
        right("split_unflatten", split_unflatten),
        right("split_chunks", split_chunks),
        bug("split_no_transpose", split_no_transpose, hidden="without the transpose", mistake=NO_TRANSPOSE),
        bug("h and d_h swapped", split_h_dh_swapped),
        bug("num_heads ignored (always 2)", split_two_heads, hidden="should have shape"),
        bug("detached", split_detached, hidden="no gradient"),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["split_heads"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
