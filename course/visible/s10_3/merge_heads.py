"""``merge_heads(x)``: (B, h, n, d_h) -> (B, n, h * d_h); the exercise, its known mistake and its
visible check (block by block: no merge is shipped)."""

from __future__ import annotations

from course.checking import CheckFailure, Mistake, close, expect_shape, passed, tolerance, visible_check
from course.visible.s10_3.heads import Heads, blocks, cotangent, expect_block, expect_heads, inputs

NO_TRANSPOSE = Mistake("no_transpose", "a reshape straight to (B, n, h * d_h) without the transpose",
                       "A reshape alone reads the heads in memory order, one head after another, and "
                       "mixes tokens. Each token's heads must sit side by side before they are joined: "
                       "the sequence axis has to come back in front of the head axis first.")

INTERLEAVED = Mistake("interleaved", "the heads interleaved feature by feature (the axes (d_h, h) flattened: "
                      "feature j of head i lands at j * h + i)",
                      "Each token's heads sit side by side, all of head 0's features first: move the head "
                      "axis next to the features as (B, n, h, d_h), then reshape.")


class MergeHeads(Heads):
    name = "merge_heads"
    reference_name = "head i of every token in feature block i"
    split = False
    mistakes = {NO_TRANSPOSE: lambda case, device: MergeHeads().outputs(
        lambda x: x.reshape(x.shape[0], x.shape[2], -1), case, device)}

    def evaluate(self, case, got, device):
        """Feature block i holds head i of every token, and the gradient flows back head by head."""
        (B, n, d), h = case.params["shape"], case.params["h"]
        x, where, d_h, out = inputs(case, device, split=False).detach(), str(case), d // h, got["output"]
        expect_shape(out, (B, n, d), "merge_heads(x)", where)
        interleaved = x.permute(0, 2, 3, 1).reshape(B, n, d)  # (B, n, d_h * h)
        if min(h, d_h) > 1 and close(out.detach(), interleaved, *tolerance(out.dtype, device)):
            raise CheckFailure(f"merge_heads(x) differs from head i of every token in feature block i in "
                               f"{where}.\n{INTERLEAVED.sentence()}", INTERLEAVED)
        wrong = x.reshape(B, n, -1)  # what merge should undo: the wrong reshape, seen from the heads' side
        for i, (head, block) in enumerate(zip(x.unbind(1), blocks(out, h))):
            expect_block(block, head, f"merge_heads(x): features {i * d_h} to {(i + 1) * d_h - 1}", where,
                         f"head {i} of every token", NO_TRANSPOSE, blocks(wrong, h)[i])
        expect_heads("the gradient of x through merge_heads(x)", where, got["grad x"], cotangent(case, out))


@visible_check
def check_merge_heads(merge_heads) -> None:
    """(B, h, n, d_h) -> (B, n, h * d_h), the inverse of split_heads."""
    MergeHeads().run_cases(merge_heads)
    passed("merge_heads puts every token's heads back side by side: the inverse of split_heads.")
