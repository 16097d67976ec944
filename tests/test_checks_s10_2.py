"""What the hidden checks of 10.2 rely on beyond right answers and planted bugs (tests/answers/s10_2)."""

import torch

from course.visible.s10_2.scaled_dot_product_attention import ScaledDotProductAttention
from course.visible.s10_2.scaled_dot_product_attention import inputs as attention_inputs
from grader.checks import s10_2

ASSIGNMENT = "10.2-scaled-dot-product-attention"


def test_masked_keys_get_no_gradient(solution):
    """Does the reference give zero gradient to keys no query may see (what the check compares)?"""
    graded = s10_2.EXERCISES["scaled_dot_product_attention"].cases()
    case = next(c for c in graded if c.params["mask"] == "padding")
    cpu = torch.device("cpu")
    outputs = ScaledDotProductAttention().run(solution["scaled_dot_product_attention"], case, cpu)
    _, mask = attention_inputs(case, cpu)
    never_seen = ~mask.any(dim=-2)  # (B, 1, n_k): keys blocked for every query
    assert never_seen.any()
    assert (outputs["grad K"][never_seen.squeeze(1)] == 0).all()


def _in_float32(attention):
    """A right attention that computes in float32 inside: about 1e-7 off on float64 inputs."""
    def attend(Q, K, V, mask=None):
        output, weights = attention(Q.float(), K.float(), V.float(), mask)
        return output.to(Q.dtype), weights.to(Q.dtype)
    return attend


def test_a_mistake_is_named_only_where_it_differs_from_the_reference(solution):
    """Rejected on a case without a mask (a float32 computation inside), is the code told nothing
    about the mask, on both sides, but named for what it does? The mask inverted gives the
    reference's outputs there."""
    from grader.checks.s10_2 import check_scaled_dot_product_attention as hidden
    from samples import run_visible_test
    from tests.check_helpers import assert_fails

    wrong = _in_float32(solution["scaled_dot_product_attention"])
    for check in (hidden, lambda impl: run_visible_test(ASSIGNMENT, "scaled_dot_product_attention", impl)):
        message = assert_fails(check, wrong, "no mask")
        diagnosis = message.partition("This looks like")[2]
        assert "mask" not in diagnosis and "float32" in diagnosis, message
