"""10.4's hidden checks beyond "this answer passes, that bug fails" (declared in tests/answers/s10_4):
messages that hide the answer, the positions checked, the reference's properties."""

from __future__ import annotations

import pytest
import torch

from grader.checks import s10_4
from grader.checks.s10_4 import apply_rotary, relative_shift_matrix
from tests.answers.s10_4.sinusoidal_positional_encoding import pe_from_one
from tests.check_helpers import assert_fails


def test_encoding_message_hides_the_answer():
    """Does a failure message give the error size but no expected value?"""
    message = assert_fails(s10_4.check_sinusoidal_positional_encoding, pe_from_one, "differs")
    assert "largest difference" in message
    assert "tensor(" not in message


def test_shift_checked_far_beyond_training_positions():
    """Does the check test positions up to 10 000, where a float32 angle error would show?"""
    positions = relative_shift_matrix.shift_positions(3, torch.device("cpu"))
    assert positions.max() >= 10_000 - 3 and positions.min() == 0


def test_rotary_reference_has_the_offset_property():
    """Does the reference's score of q at m and k at n depend only on m - n (and the
    mistakes that break it really break it)?"""
    case = next(c for c in apply_rotary.CASES if "offset" in c.params)
    scores = s10_4.EXERCISES["apply_rotary"].reference(case, torch.device("cpu"))["scores"]
    assert torch.allclose(scores[1:, 1:], scores[:-1, :-1], atol=1e-12)
    assert not torch.allclose(scores[1:, :], scores[:-1, :], atol=1e-3)  # not constant either


@pytest.mark.parametrize("mistake", list(s10_4.EXERCISES["apply_rotary"].mistakes), ids=lambda m: m.name)
def test_every_rotary_mistake_shows_in_some_case(mistake):
    """Is every named rotary mistake different from the right answer in at least one case?"""
    exercise, device = s10_4.EXERCISES["apply_rotary"], torch.device("cpu")
    differs = False
    for case in exercise.cases():
        want, got = exercise.reference(case, device), exercise.mistakes[mistake](case, device)
        key = next(iter(want))
        differs |= not torch.allclose(got[key].double(), want[key].double(), atol=1e-6)
    assert differs, mistake.name


def test_unplaced_tensor_check_spares_right_answers():
    """Does the unplaced-tensor check accept arange(device=x.device), a CPU scalar tensor and
    .to(x.device), and reject a bare arange?"""
    from course.checking import check_unplaced_tensors

    x = torch.randn(2, 3, 4)
    check_unplaced_tensors("f", lambda: x * torch.arange(4, device=x.device))
    check_unplaced_tensors("f", lambda: x * torch.tensor(2.0))
    check_unplaced_tensors("f", lambda: x * torch.arange(4).to(x.device))
    with pytest.raises(AssertionError, match="fixed device"):
        check_unplaced_tensors("f", lambda: x * torch.arange(4))
