"""Visible check of ``split_heads(x, num_heads)``: (B, n, d) -> (B, h, n, d // h), and its known mistake."""

from __future__ import annotations

from course.checking import Mistake, call_learner, expect_shape, expect_tensor, passed, seeded, visible_check
from course.visible.s10_3.heads import CASES, expect_heads, with_gradient

TRANSPOSE_HINT = ("Reshape to (B, n, h, d_h) first, then swap the sequence and head axes "
                  "with .transpose(1, 2).")
NO_TRANSPOSE = Mistake("no_transpose", "a reshape straight to (B, h, n, d_h) without the transpose",
                       TRANSPOSE_HINT)


@visible_check
def check_split_heads(split_heads) -> None:
    """(B, n, d) -> (B, h, n, d // h), with head i holding feature block i of every token."""
    for seed, (case, B, n, d, h, dtype) in enumerate(CASES):
        x, where, what = seeded(B, n, d, seed=seed, dtype=dtype), f"case '{case}'", f"split_heads(x, {h})"

        def learner(x, where=where, h=h):
            return expect_tensor(call_learner("split_heads", where, split_heads, x, h),
                                 "split_heads's result")

        got, grad, cotangent = with_gradient(learner, x, seed)
        expect_shape(got, (B, h, n, d // h), what, where)
        expect_heads(what, where, got, x, NO_TRANSPOSE, x.reshape(B, h, n, -1))  # the mistake's heads
        expect_heads(f"the gradient of x through {what}", where, cotangent, grad)
    passed("split_heads puts feature block i of every token into head i.")
