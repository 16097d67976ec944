"""What the checks of 10.3 say beyond right answers and planted bugs (tests/answers/s10_3)."""

import pytest
import torch

from course.checking import CheckFailure, explain_exception
from course.visible import s10_3 as visible
from tests.answers.s10_3.merge_heads import merge_view


def _raised(function) -> RuntimeError:
    with pytest.raises(RuntimeError) as info:
        function()
    return info.value


def test_view_after_a_transpose_is_told_to_reshape():
    """Does merge_heads with .view after its transpose hear that the tensor is not contiguous?"""
    with pytest.raises(CheckFailure, match=r"not contiguous.*\.reshape"):
        visible.check_merge_heads(merge_view)


def test_view_after_a_slice_is_not_blamed_on_a_transpose():
    """Is a .view after a slice (no transpose anywhere) told what went wrong, without a transpose
    it never made?"""
    error = _raised(lambda: torch.zeros(2, 5, 3)[:, :-1].view(-1, 3))  # the slice leaves a gap per row
    message = explain_exception("lm_loss", error, "a batch of 2")
    assert "not contiguous" in message and ".reshape" in message
    assert "after a transpose" not in message.lower()
