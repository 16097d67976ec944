"""dot_product_variance: right answers written differently, and planted bugs."""

import math

import torch

from tests.answers import bug, right

EXERCISE = "dot_product_variance"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'an experiment: the variance of random dot products, arithmetic'
#: What the check says when the scaled variance is not about 1.
NOT_SCALED = r"divided by sqrt\(d_k\) before the variance"


def variance_as_tensor(d_k, num_samples=10_000, scaled=False):
    dots = (torch.randn(num_samples, d_k) * torch.randn(num_samples, d_k)).sum(-1)
    return (dots / math.sqrt(d_k) if scaled else dots).var()  # a 0-d tensor is a number too


def variance_no_scaling(d_k, num_samples=10_000, scaled=False):
    q, k = torch.randn(num_samples, d_k), torch.randn(num_samples, d_k)
    return (q * k).sum(-1).var().item()


def variance_scaled_by_dk(d_k, num_samples=10_000, scaled=False):
    dots = (torch.randn(num_samples, d_k) * torch.randn(num_samples, d_k)).sum(-1)
    return (dots / d_k if scaled else dots).var().item()


def variance_uniform(d_k, num_samples=10_000, scaled=False):
    dots = (torch.rand(num_samples, d_k) * torch.rand(num_samples, d_k)).sum(-1)
    return (dots / math.sqrt(d_k) if scaled else dots).var().item()


def variance_per_entry(d_k, num_samples=10_000, scaled=False):
    """The products q_i k_i never summed over the features: the variance of one product."""
    q, k = torch.randn(num_samples, d_k), torch.randn(num_samples, d_k)
    return ((q * k) / math.sqrt(d_k) if scaled else q * k).var().item()


def variance_all_pairs(d_k, num_samples=10_000, scaled=False):
    """Every query with every key, then only the diagonal: num_samples² products for num_samples."""
    q, k = torch.randn(num_samples, d_k), torch.randn(num_samples, d_k)
    dots = (q @ k.T).diagonal()
    return (dots / math.sqrt(d_k) if scaled else dots).var().item()


def variance_in_one_draw(d_k, num_samples=10_000, scaled=False):
    q, k = torch.randn(2, num_samples, d_k)
    dots = torch.einsum("nd,nd->n", q, k)
    return (dots / math.sqrt(d_k) if scaled else dots).var().item()


def answers(solution):
    return [
        right("solution", solution["dot_product_variance"]),
        right("a 0-d tensor", variance_as_tensor),
        right("q and k in one draw, einsum", variance_in_one_draw),
        bug("variance_no_scaling", variance_no_scaling, hidden=NOT_SCALED),
        bug("variance_scaled_by_dk", variance_scaled_by_dk, hidden=NOT_SCALED),
        bug("variance_per_entry (not summed)", variance_per_entry, hidden=r"single products"),
        bug("variance_uniform", variance_uniform, hidden="standard normal"),
        bug("variance_all_pairs (every query with every key)", variance_all_pairs,
            hidden=r"its own pair \(row i of q"),
    ]
