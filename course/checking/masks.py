"""The masks cases are checked with (True = may attend): the same kinds on both sides."""

from __future__ import annotations

import torch


def case_mask(kind: str, lead: tuple, n_q: int, n_k: int, g: torch.Generator) -> torch.Tensor | None:
    """A boolean mask (True = may attend) of ``kind`` ("none", "causal", "padding", "padding+causal"
    or "random") for scores (*lead, n_q, n_k); every query keeps at least one key, and a padding mask
    of a batch pads one sequence and not another."""
    if kind == "none":
        return None
    causal = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
    if kind == "causal":
        return causal  # (n_q, n_k), broadcast over leading dims
    batch = lead[0] if lead else 1
    lengths = torch.randint(max(1, n_k - 2), n_k + 1, (batch,), generator=g)
    lengths[0] = n_k - 2  # at least one padded sequence
    lengths[1:2] = n_k  # and one without padding, whatever the seed: a mask inverted leaves it no key
    padding = torch.arange(n_k) < lengths[:, None]  # (B, n_k)
    padding = padding.view(batch, *([1] * (len(lead) - 1)), 1, n_k)  # (B, [1,] 1, n_k)
    if kind == "padding":
        return padding
    if kind == "padding+causal":
        return padding & causal
    random = torch.rand(*lead, n_q, n_k, generator=g) < 0.6
    random[..., 0] = True  # key 0 always visible: no query is left without a key
    return random
