"""The cases both 10.1 exercises are checked on: every dimension differs, so no swapped axis hides."""

from __future__ import annotations

import torch

from grader.checks.core import Case

SHAPES = [  # name, leading dims, n, d, d_k, d_v
    ("2-D X (n=3, d=5)", (), 3, 5, 4, 6),
    ("3-D X (batch 2)", (2,), 3, 5, 4, 6),
    ("4-D X (2, 3 leading dims)", (2, 3), 4, 5, 2, 7),
    ("d_k equal to d", (2,), 3, 5, 5, 6),
]


def cases() -> list[Case]:
    out = [Case(name, seed=100 + i, params={"lead": lead, "n": n, "d": d, "d_k": d_k, "d_v": d_v})
           for i, (name, lead, n, d, d_k, d_v) in enumerate(SHAPES)]
    float32 = {"lead": (2,), "n": 3, "d": 5, "d_k": 4, "d_v": 6}
    out.append(Case("float32, batch 2", seed=150, params=float32, dtype=torch.float32))
    return out
