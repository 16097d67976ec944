"""The cases both 10.1 exercises are graded on: the visible kinds again, other shapes, float64."""

from __future__ import annotations

import torch

from course.checking import Case
from course.visible.s10_1.qkv_projections import dims

SHAPES = [  # name, kind, leading dims, n, d, d_k, d_v
    ("2-D X (n=3, d=5)", "2-D", (), 3, 5, 4, 6),
    ("3-D X (batch 2)", "3-D", (2,), 3, 5, 4, 6),
    ("4-D X (2, 3 leading dims)", "4-D", (2, 3), 4, 5, 2, 7),
    ("d_k equal to d", "d_k equal to d", (2,), 3, 5, 5, 6),
]


def cases() -> list[Case]:
    out = [Case(name, 100 + i, dims(*shape), kind=kind) for i, (name, kind, *shape) in enumerate(SHAPES)]
    return [*out, Case("float32, batch 2", 150, dims((2,), 3, 5, 4, 6), torch.float32, kind="3-D")]
