"""What the checks of split_heads and merge_heads share: their cases, feature blocks, heads."""

from __future__ import annotations

import torch

from course.checking import Mistake, compare_outputs, seeded, with_gradients

CASES = [  # name, B, n, d_model, h, dtype
    ("B=2, n=3, d_model=12, h=4", 2, 3, 12, 4, torch.float32),
    ("B=3, n=5, d_model=6, h=2, float64", 3, 5, 6, 2, torch.float64),
    ("one head", 2, 3, 8, 1, torch.float32),
    ("one feature per head", 2, 3, 4, 4, torch.float64),
]


def blocks(x: torch.Tensor, h: int) -> list[torch.Tensor]:
    """Feature block i (columns i·d_h to (i+1)·d_h - 1) of every token: h tensors (B, n, d_h)."""
    d_h = x.shape[-1] // h
    return [x[..., i * d_h:(i + 1) * d_h] for i in range(h)]


def expect_block(got: torch.Tensor, want: torch.Tensor, what: str, where: str, against: str,
                 mistake: Mistake | None = None, wrong: torch.Tensor | None = None) -> None:
    """One block or head against what it must hold; ``mistake`` is named when it gives ``wrong``."""
    variants = {} if mistake is None else {mistake: lambda: {"output": wrong}}
    compare_outputs({"output": got}, {"output": want.detach()}, what, where, against=against,
                    variants=variants)


def expect_heads(what: str, where: str, heads: torch.Tensor, tokens: torch.Tensor,
                 mistake: Mistake | None = None, wrong: torch.Tensor | None = None) -> None:
    """Head i of ``heads`` (B, h, n, d_h) must hold feature block i of ``tokens`` (B, n, d).

    ``mistake`` is named when ``wrong``, the heads it gives, fits.
    """
    for i, (head, block) in enumerate(zip(heads.unbind(1), blocks(tokens, heads.shape[1]))):
        d_h = head.shape[-1]
        expect_block(head, block, f"{what}: head {i}", where,
                     f"feature block {i} of every token (features {i * d_h} to {(i + 1) * d_h - 1})",
                     mistake, None if wrong is None else wrong[:, i])


def with_gradient(function, x: torch.Tensor, seed: int):
    """function(x), the gradient of x for a seeded random loss (a cut graph fails), and that
    loss's cotangent."""
    x = x.detach().requires_grad_()
    out = with_gradients(lambda: (function(x),), ("output",), {"x": x}, seed)
    cotangent = seeded(*out["output"].shape, seed=seed + 7919, dtype=torch.float64).to(x.dtype)
    return out["output"], out["grad x"], cotangent
