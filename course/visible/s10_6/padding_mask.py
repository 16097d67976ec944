"""``padding_mask(tokens, pad_id)``: the exercise (against ``tokens != pad_id``, shaped (B, 1, 1, n)),
its known mistakes and its visible check."""

from __future__ import annotations

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    passed,
    visible_check,
)
from course.checking.standins import expect_bool_mask

INVERTED = Mistake("inverted", "the padding mask inverted (True at the padding)",
                   "True means *may attend*: True at the real tokens, False where the id is pad_id.")
PAD_ZERO = Mistake("pad_zero", "a mask that ignores pad_id and treats id 0 as the padding",
                   "Compare with the pad_id argument, not with 0.")
FROM_LENGTHS = Mistake("from_lengths", "a mask built from each sentence's length (its first k positions), "
                       "which assumes the padding comes last",
                       "Mark each position by its own token: True where tokens != pad_id, wherever the "
                       "padding sits.")


def _first_k(tokens: torch.Tensor, pad: int) -> torch.Tensor:
    """The first (number of real tokens) positions of each row: (B, n)."""
    lengths = (tokens != pad).sum(dim=1)  # (B,)
    return torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]


#: Each mistake as a (B, n) mask of token ids and pad_id.
WRONG = {INVERTED: lambda tokens, pad: tokens == pad, PAD_ZERO: lambda tokens, pad: tokens != 0,
         FROM_LENGTHS: _first_k}
SHAPE_HINT = ("The padding mask hides *keys*: it must broadcast against scores of shape (B, h, n_q, n_k), so "
              "it has shape (B, 1, 1, n): one entry per key, the same for every head and every query. Add "
              "the two axes of length 1 between the batch and the keys.")
CASES = [  # rows of token ids, pad_id
    Case("B=2, n=5, padding at the end", 710, {"rows": [[5, 9, 4, 7, 0], [6, 8, 0, 0, 0]], "pad": 0},
         kind="padding at the end"),
    Case("B=3, n=4, no padding", 711, {"rows": [[4, 5, 6, 7], [7, 6, 5, 4], [1, 2, 3, 9]], "pad": 0},
         kind="no padding"),
    Case("pad_id=5 (and 0 is a real word)", 712,
         {"rows": [[0, 3, 8, 5, 5, 5], [7, 0, 1, 2, 9, 5], [4, 4, 0, 5, 5, 5]], "pad": 5}, kind="pad_id 5"),
    Case("padding at the start", 713, {"rows": [[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]], "pad": 0},
         kind="padding at the start"),
]


def expect_key_shape(mask: torch.Tensor, B: int, n: int, what: str, where: str) -> None:
    """The (B, 1, 1, n) shape, with what a padding mask is for when it is off."""
    if tuple(mask.shape) != (B, 1, 1, n):
        raise CheckFailure(f"{what} should have shape (B, 1, 1, n) = {(B, 1, 1, n)} in {where}, but "
                           f"returned {tuple(mask.shape)}. {SHAPE_HINT}")


def _with(fn, case: Case, device) -> dict:
    """``fn(tokens, pad_id)``'s (B, n) mask on the case, as float64 0/1 (the usual comparison applies)."""
    tokens = torch.tensor(case.params["rows"], dtype=torch.long, device=device)  # (B, n)
    return {"mask": fn(tokens, case.params["pad"]).to(torch.float64)}


class PaddingMask(Exercise):
    name = "padding_mask"
    reference_name = "the mask of the real tokens (every id other than pad_id), shaped (B, 1, 1, n)"
    mistakes = {m: (lambda case, device, wrong=wrong: _with(wrong, case, device))
                for m, wrong in WRONG.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        def learner(tokens, pad_id):
            mask = expect_bool_mask(self.call(case, impl, tokens, pad_id), "padding_mask's result", str(case))
            expect_key_shape(mask, *tokens.shape, "padding_mask's result", str(case))
            return mask[:, 0, 0, :]  # (B, n)

        return _with(learner, case, device)

    def reference(self, case, device):
        return _with(lambda tokens, pad: ~(tokens == pad), case, device)  # PyTorch's padding mask, inverted


@visible_check
def check_padding_mask(padding_mask) -> None:
    """A bool (B, 1, 1, n) mask, True for real tokens, with any pad_id."""
    PaddingMask().run_cases(padding_mask)
    passed("padding_mask hides the padding keys, for any pad_id, and broadcasts over heads and queries.")
