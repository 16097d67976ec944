"""The running example of the course: the four tokens "nous mangeons du pain"."""

import torch

TOKENS = ["nous", "mangeons", "du", "pain"]


def example_embeddings(d_model: int = 8, seed: int = 0) -> torch.Tensor:
    """Embeddings for ``TOKENS``: a fixed random matrix X of shape (4, d_model).

    Random but reproducible, so every learner sees the same numbers: standard normal
    entries (mean 0, variance 1 in expectation; no row is rescaled), the scale at which
    ``nn.Embedding`` starts.
    """
    g = torch.Generator().manual_seed(seed)
    return torch.randn(len(TOKENS), d_model, generator=g)  # (n=4, d_model)


def example_weights(d_model: int, d_out: int, seed: int) -> torch.Tensor:
    """A fixed projection matrix W of shape (d_model, d_out), scaled by 1/sqrt(d_model)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d_model, d_out, generator=g) / d_model**0.5
