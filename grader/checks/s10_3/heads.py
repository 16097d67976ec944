"""The cases split_heads and merge_heads are checked on, and their inputs."""

from __future__ import annotations

import torch

from grader.checks.core import Case, Outputs, generator, randn
from grader.checks.exercise import forward_backward

CASES = [  # B, n, d_model, h: all different where possible
    Case("B=2, n=3, d_model=12, h=4", 500, {"shape": (2, 3, 12), "h": 4}),
    Case("B=3, n=5, d_model=6, h=2", 501, {"shape": (3, 5, 6), "h": 2}),
    Case("one head", 502, {"shape": (2, 3, 8), "h": 1}),
    Case("one feature per head", 503, {"shape": (2, 3, 4), "h": 4}),
    Case("float32", 504, {"shape": (2, 3, 12), "h": 3}, dtype=torch.float32),
]


def split_with(fn, case: Case, device: torch.device) -> Outputs:
    """``fn(x, h)`` on the case's (B, n, d_model) input, with the gradient of x."""
    x = randn(case.params["shape"], generator(case.seed), case.dtype, device).requires_grad_()
    return forward_backward(lambda: (fn(x, case.params["h"]),), ("output",), {"x": x}, case.seed)


def merge_with(fn, case: Case, device: torch.device) -> Outputs:
    """``fn(x)`` on the case's (B, h, n, d_h) input, with the gradient of x."""
    (B, n, d), h = case.params["shape"], case.params["h"]
    x = randn((B, h, n, d // h), generator(case.seed), case.dtype, device).requires_grad_()
    return forward_backward(lambda: (fn(x),), ("output",), {"x": x}, case.seed)
