"""The cases split_heads and merge_heads are graded on: the visible kinds again, other sizes."""

from __future__ import annotations

import torch

from course.checking import Case

CASES = [  # B, n, d_model, h: all different where possible
    Case("B=2, n=3, d_model=12, h=4", 500, {"shape": (2, 3, 12), "h": 4}, kind="several heads"),
    Case("B=3, n=5, d_model=6, h=2", 501, {"shape": (3, 5, 6), "h": 2}, kind="several heads"),
    Case("one head", 502, {"shape": (2, 3, 8), "h": 1}, kind="one head"),
    Case("one feature per head", 503, {"shape": (2, 3, 4), "h": 4}, kind="one feature per head"),
    Case("float32", 504, {"shape": (2, 3, 12), "h": 3}, torch.float32, kind="several heads"),
]
