"""Visible check of ``merge_heads(x)``: (B, h, n, d_h) -> (B, n, h * d_h), and its known mistake."""

from __future__ import annotations

from course.checking import Mistake, call_learner, expect_shape, expect_tensor, passed, seeded, visible_check
from course.visible.s10_3.heads import CASES, blocks, expect_block, expect_heads, with_gradient

NO_TRANSPOSE = Mistake("no_transpose", "a reshape straight to (B, n, h * d_h) without the transpose",
                       "Swap the head and sequence axes back with .transpose(1, 2), then "
                       ".reshape(B, n, h * d_h).")


@visible_check
def check_merge_heads(merge_heads) -> None:
    """(B, h, n, d_h) -> (B, n, h * d_h), the inverse of split_heads."""
    for seed, (case, B, n, d, h, dtype) in enumerate(CASES):
        x, where, d_h = seeded(B, h, n, d // h, seed=seed, dtype=dtype), f"case '{case}'", d // h

        def learner(x, where=where):
            return expect_tensor(call_learner("merge_heads", where, merge_heads, x), "merge_heads's result")

        got, grad, cotangent = with_gradient(learner, x, seed)
        expect_shape(got, (B, n, d), "merge_heads(x)", where)
        wrong = x.reshape(B, n, -1)  # what merge should undo: the wrong reshape, seen from the heads' side
        for i, (head, block) in enumerate(zip(x.unbind(1), blocks(got, h))):
            expect_block(block, head, f"merge_heads(x): features {i * d_h} to {(i + 1) * d_h - 1}", where,
                         f"head {i} of every token", NO_TRANSPOSE, blocks(wrong, h)[i])
        expect_heads("the gradient of x through merge_heads(x)", where, grad, cotangent)
    passed("merge_heads puts every token's heads back side by side: the inverse of split_heads.")
