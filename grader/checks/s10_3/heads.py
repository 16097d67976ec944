"""The cases split_heads and merge_heads are graded on, after the visible ones re-seeded: their kinds
in another dtype, other sizes."""

from __future__ import annotations

import torch

from course.checking import Case

CASES = [  # B, n, d_model, h: all different where possible
    Case("B=2, n=3, d_model=12, h=4, float64", 500, {"shape": (2, 3, 12), "h": 4}, kind="several heads"),
    Case("one head, float64", 502, {"shape": (2, 3, 8), "h": 1}, kind="one head"),
    Case("float32", 504, {"shape": (2, 3, 12), "h": 3}, torch.float32, kind="several heads"),
]
