"""Visible check of ``padding_mask(tokens, pad_id)``, and its known mistakes."""

from __future__ import annotations

import torch

from course.checking import CheckFailure, Mistake, call_learner, compare_outputs, passed, visible_check
from course.checking.standins import expect_bool_mask

INVERTED = Mistake("inverted", "the padding mask inverted (True at the padding)",
                   "True means *may attend*: True for real tokens, tokens != pad_id.")
PAD_ZERO = Mistake("pad_zero", "a mask that ignores pad_id and treats id 0 as the padding",
                   "Compare with the pad_id argument, not with 0.")
#: Each mistake as a (B, n) mask of token ids and pad_id.
WRONG = {INVERTED: lambda tokens, pad: tokens == pad, PAD_ZERO: lambda tokens, pad: tokens != 0}
SHAPE_HINT = ("The padding mask hides *keys*: it must broadcast against scores of shape (B, h, n_q, n_k), so "
              "it has shape (B, 1, 1, n): one entry per key, the same for every head and every query. Index "
              "it as (tokens != pad_id)[:, None, None, :].")
CASES = [  # name, rows of token ids, pad_id
    ("B=2, n=5, padding at the end", [[5, 9, 4, 7, 0], [6, 8, 0, 0, 0]], 0),
    ("B=3, n=4, no padding", [[4, 5, 6, 7], [7, 6, 5, 4], [1, 2, 3, 9]], 0),
    ("pad_id=5 (and 0 is a real word)", [[0, 3, 8, 5, 5, 5], [7, 0, 1, 2, 9, 5], [4, 4, 0, 5, 5, 5]], 5),
    ("padding at the start", [[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]], 0),
]


def expect_key_shape(mask: torch.Tensor, B: int, n: int, what: str, where: str) -> None:
    """The (B, 1, 1, n) shape, with what a padding mask is for when it is off."""
    if tuple(mask.shape) != (B, 1, 1, n):
        raise CheckFailure(f"{what} should have shape (B, 1, 1, n) = {(B, 1, 1, n)} in {where}, but "
                           f"returned {tuple(mask.shape)}. {SHAPE_HINT}")


@visible_check
def check_padding_mask(padding_mask) -> None:
    """A bool (B, 1, 1, n) mask, True for real tokens, with any pad_id."""
    for name, rows, pad in CASES:
        case, tokens = f"case '{name}'", torch.tensor(rows)
        what = f"padding_mask(tokens, pad_id={pad})"
        mask = expect_bool_mask(call_learner("padding_mask", case, padding_mask, tokens, pad), what, case)
        expect_key_shape(mask, *tokens.shape, what, case)
        real = ~(tokens == pad)  # (B, n): PyTorch's key_padding_mask is tokens == pad_id (True = ignore)
        variants = {m: (lambda wrong=wrong, tokens=tokens, pad=pad: {"output": wrong(tokens, pad).double()})
                    for m, wrong in WRONG.items()}
        compare_outputs({"output": mask[:, 0, 0, :].double()}, {"output": real.double()}, what, case,
                        against="True for every token that is not pad_id", variants=variants)
    passed("padding_mask hides the padding keys, for any pad_id, and broadcasts over heads and queries.")
