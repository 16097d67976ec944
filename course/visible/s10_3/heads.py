"""What split_heads and merge_heads share: feature blocks, heads, and checking one against the other.

The visible checks ship no split or merge: they compare every head with the feature block it
must hold (head i holds features i·d_h to (i+1)·d_h - 1 of every token), gradients too.
"""

from __future__ import annotations

import torch

from course.checking import (
    Case,
    Exercise,
    Mistake,
    compare_outputs,
    expect_tensor,
    generator,
    randn,
    with_gradients,
)

CASES = [  # params: the tokens' shape (B, n, d_model) and h
    Case("B=2, n=3, d_model=12, h=4", 70, {"shape": (2, 3, 12), "h": 4}, torch.float32, kind="several heads"),
    Case("B=3, n=5, d_model=6, h=2, float64", 71, {"shape": (3, 5, 6), "h": 2}, kind="several heads"),
    Case("one head", 72, {"shape": (2, 3, 8), "h": 1}, torch.float32, kind="one head"),
    Case("one feature per head", 73, {"shape": (2, 3, 4), "h": 4}, kind="one feature per head"),
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


def inputs(case: Case, device, split: bool) -> torch.Tensor:
    """A case's input, a leaf: the tokens (B, n, d_model) to split, or the heads (B, h, n, d_h) to merge."""
    (B, n, d), h = case.params["shape"], case.params["h"]
    shape = (B, n, d) if split else (B, h, n, d // h)
    return randn(shape, generator(case.seed), case.dtype, device).requires_grad_()


def cotangent(case: Case, out: torch.Tensor) -> torch.Tensor:
    """The seeded random direction ``with_gradients`` takes the gradient of (out · cotangent)."""
    return randn(out.shape, generator(case.seed + 7919), out.dtype, out.device)


class Heads(Exercise):
    """split_heads or merge_heads: run on a case's input with the gradient of x."""

    split = True
    visible_cases = CASES

    def outputs(self, function, case: Case, device) -> dict:
        """``function`` on the case's input (with h when splitting), with the gradient of x."""
        x = inputs(case, device, self.split)
        args = (x, case.params["h"]) if self.split else (x,)
        return with_gradients(lambda: (function(*args),), ("output",), {"x": x}, case.seed)

    def run(self, impl, case, device):
        def learner(*args):
            return expect_tensor(self.call(case, impl, *args), f"{self.name}'s result", case)

        return self.outputs(learner, case, device)
