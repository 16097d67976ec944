"""What several sections' checks share: case masks, reference attention, heads, positions.

Public on purpose: 10.3, 10.5 and 10.6 build masks and attention weights as 10.2 does,
10.5 splits heads as 10.3 does, and 10.6 adds the positional table of 10.4. One copy each,
here, so a fix reaches every section.
"""

from __future__ import annotations

import math

import torch

from course.checking.masks import case_mask  # noqa: F401 - both sides' masks, the checks' name

F64 = torch.float64

# ---------------------------------------------------------------- masks and attention


def attention_weights(Q, K, mask, scale: float | None = None, fill=float("-inf"), dim=-1):
    """softmax(QK^T * scale) with masked scores set to ``fill``; scale defaults to 1/sqrt(d_k)."""
    scores = Q @ K.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    return torch.softmax(scores, dim=dim)


# ---------------------------------------------------------------- heads


def reference_split(x: torch.Tensor, h: int) -> torch.Tensor:
    B, n, d = x.shape  # batch, sequence, d_model
    return x.view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d_h)


def reference_merge(x: torch.Tensor) -> torch.Tensor:
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).reshape(B, n, h * d_h)  # (B, n, d_model)


def reference_padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    return (tokens != pad_id)[:, None, None, :]  # (B, n) -> (B, 1, 1, n), True = a real token


# ---------------------------------------------------------------- the sinusoidal positional table


def frequencies(d_model: int, device: torch.device, *, exponent: str = "2i/d",
                inverted: bool = False) -> torch.Tensor:
    """omega_i = 10000^(-2i/d_model) for every pair i (ceil(d_model / 2) of them), float64.

    ``exponent`` and ``inverted`` switch on known mistakes: "i/d" (the pair index without the
    factor 2), "4i/d" (the column index 2i used where i belongs), and omega = 10000^(+2i/d).
    """
    pair = torch.arange((d_model + 1) // 2, dtype=F64, device=device)
    power = {"2i/d": 2 * pair / d_model, "i/d": pair / d_model, "4i/d": 4 * pair / d_model}[exponent]
    base = torch.full_like(power, 10000.0)
    return torch.pow(base, power if inverted else -power)


def encoding(positions: torch.Tensor, d_model: int, *, swap: bool = False, halves: bool = False,
             cos_column: bool = False, **omega_mistakes) -> torch.Tensor:
    """PE[pos] for float64 ``positions``: (len(positions), d_model), float64.

    ``swap`` puts the cosine in the even columns; ``halves`` writes all sines first and all
    cosines after them instead of interleaving the pairs; ``cos_column`` gives the cosine of
    column 2i+1 the exponent (2i+1)/d_model (its own column index) instead of 2i/d_model.
    """
    omega = frequencies(d_model, positions.device, **omega_mistakes)
    angle = positions.to(F64)[:, None] * omega  # (P, ceil(d_model / 2))
    first, second = (angle.cos(), angle.sin()) if swap else (angle.sin(), angle.cos())
    if cos_column:
        odd = torch.arange(1, 2 * omega.shape[0], 2, dtype=F64, device=positions.device)
        second = (positions.to(F64)[:, None] * torch.pow(10000.0, -odd / d_model)).cos()
    if halves:
        return torch.cat([first, second[:, : d_model // 2]], dim=-1)
    return torch.stack([first, second], dim=-1).flatten(-2)[:, :d_model]  # s0 c0 s1 c1 ...


def encoding_table(max_len: int, d_model: int, device: torch.device, *, start: int = 0,
                   **mistakes) -> torch.Tensor:
    """The (max_len, d_model) float64 table of positions start .. start + max_len - 1."""
    positions = torch.arange(start, start + max_len, dtype=F64, device=device)
    return encoding(positions, d_model, **mistakes)


def sinusoidal_table(max_len: int, d_model: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The positional-encoding table of 10.4 (computed in float64): (max_len, d_model)."""
    return encoding_table(max_len, d_model, torch.device("cpu")).to(device, dtype)


def reference_sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """10.4's exercise as its contract says: (max_len, d_model), float32, on the CPU."""
    return sinusoidal_table(max_len, d_model, torch.float32, "cpu")
