"""``split_heads(x, num_heads)``: (B, n, d) -> (B, h, n, d // h); the exercise, its known mistake
and its visible check (head by head: no split is shipped)."""

from __future__ import annotations

from course.checking import Mistake, expect_shape, passed, visible_check
from course.visible.s10_3.heads import Heads, cotangent, expect_heads, inputs

TRANSPOSE_HINT = ("A single reshape to (B, h, n, d_h) reads the numbers in memory order and mixes tokens "
                  "with heads (the small example above the exercise shows it). Each token's features "
                  "must be cut into heads while the tokens are still the second axis; only then may "
                  "the head axis move in front of the sequence axis.")
NO_TRANSPOSE = Mistake("no_transpose", "a reshape straight to (B, h, n, d_h) without the transpose",
                       TRANSPOSE_HINT)


class SplitHeads(Heads):
    name = "split_heads"
    reference_name = "feature block i of every token in head i"
    mistakes = {NO_TRANSPOSE: lambda case, device: SplitHeads().outputs(
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), case, device)}

    def evaluate(self, case, got, device):
        """Head i holds feature block i of every token, and the gradient flows back block by block."""
        (B, n, d), h = case.params["shape"], case.params["h"]
        x, what = inputs(case, device, split=True).detach(), f"split_heads(x, {h})"
        expect_shape(got["output"], (B, h, n, d // h), what, str(case))
        expect_heads(what, str(case), got["output"], x, NO_TRANSPOSE, x.reshape(B, h, n, -1))
        expect_heads(f"the gradient of x through {what}", str(case), cotangent(case, got["output"]),
                     got["grad x"])


@visible_check
def check_split_heads(split_heads) -> None:
    """(B, n, d) -> (B, h, n, d // h), with head i holding feature block i of every token."""
    SplitHeads().run_cases(split_heads)
    passed("split_heads puts feature block i of every token into head i.")
