"""merge_heads: right answers written differently, and planted bugs."""

import torch

from course.visible.s10_3.merge_heads import INTERLEAVED, NO_TRANSPOSE
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "merge_heads"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'products, views and activations a right answer runs too (F.linear is forbidden by name)'


def merge_permute(x):
    return x.permute(0, 2, 1, 3).flatten(2)


def merge_cat(x):
    return torch.cat(x.unbind(1), dim=-1)


def merge_no_transpose(x):
    B, h, n, d_h = x.shape
    return x.reshape(B, n, h * d_h)


def merge_view(x):
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).view(B, n, h * d_h)


def merge_heads_last(x):
    return x.transpose(1, 2).transpose(2, 3).flatten(2)  # (B, n, d_h * h): features interleaved


def answers(solution):
    return [
        right("solution", solution["merge_heads"]),
        right("merge_permute", merge_permute),
        right("merge_cat", merge_cat),
        bug("merge_no_transpose", merge_no_transpose, hidden="without the transpose", mistake=NO_TRANSPOSE),
        bug("merge_view", merge_view, hidden="not contiguous.*reshape"),
        bug("merge_heads_last", merge_heads_last, hidden="differs", mistake=INTERLEAVED),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["merge_heads"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
