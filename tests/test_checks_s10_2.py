"""What the hidden checks of 10.2 rely on beyond right answers and planted bugs (tests/answers/s10_2)."""

import torch

from grader.checks.s10_2.scaled_dot_product_attention import (
    CASES,
    ScaledDotProductAttention,
    attention_inputs,
)

ASSIGNMENT = "10.2-scaled-dot-product-attention"


def test_masked_keys_get_no_gradient(solution):
    """Does the reference give zero gradient to keys no query may see (what the check compares)?"""
    case = next(c for c in CASES if c.params["mask"] == "padding")
    cpu = torch.device("cpu")
    outputs = ScaledDotProductAttention().run(solution["scaled_dot_product_attention"], case, cpu)
    _, mask = attention_inputs(case, cpu)
    never_seen = ~mask.any(dim=-2)  # (B, 1, n_k): keys blocked for every query
    assert never_seen.any()
    assert (outputs["grad K"][never_seen.squeeze(1)] == 0).all()
