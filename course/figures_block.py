"""Figures for 10.4 (positional encoding) and 10.5 (the Transformer block)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from course.plotting import heatmap


def moving_mean(values, smooth: int) -> tuple[int, torch.Tensor]:
    """The window (``smooth``, at most the length) and the mean of each run of that many values:
    (len(values) - window + 1,) float64."""
    values = torch.as_tensor(values, dtype=torch.float64)
    window = max(1, min(smooth, len(values)))
    return window, values.unfold(0, window, 1).mean(dim=1)

def _numpy(matrix):
    """A tensor (or array) as a float CPU numpy array."""
    if isinstance(matrix, torch.Tensor):
        return matrix.detach().float().cpu().numpy()
    return matrix


def encoding_heatmap(pe, *, title="Sinusoidal positional encoding", ax=None):
    """The encoding (positions, d_model) as an image: one row per position, one column per dimension."""
    values = _numpy(pe)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    image = ax.imshow(values, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("dimension (column of pe)")
    ax.set_ylabel("position")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="value")
    return ax


def encoding_curves(pe, dims: Sequence[int], *, title="A few dimensions of the encoding", ax=None,
                    samples_per_position: int = 20):
    """Columns ``dims`` of the encoding (positions 0, 1, ... in its rows): each column's values
    at the whole positions as dots, on the sine or cosine curve they sample, drawn finely."""
    values = _numpy(pe)
    positions, d_model = values.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    t = np.linspace(0, positions - 1, (positions - 1) * samples_per_position + 1)  # fractional positions
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        frequency = 10000.0 ** (-(d - d % 2) / d_model)  # omega of pair d // 2
        curve = np.sin(frequency * t) if kind == "sin" else np.cos(frequency * t)
        (line,) = ax.plot(t, curve, linewidth=1.2, label=f"dim {d} ({kind}, pair i={d // 2})")
        ax.plot(range(positions), values[:, d], "o", markersize=2.5, color=line.get_color())
    ax.set_title(title)
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return ax


def order_comparison(out, out_reordered, labels, *, title="", vmax=0.1):
    """Outputs for a sentence and for its reordering (rows put back in the first order), and their gap.

    ``out`` and ``out_reordered`` are (n, d); row i of both belongs to token ``labels[i]``.
    The third panel, |difference|, always spans [0, vmax], so two figures can be compared.
    """
    out, out_reordered = _numpy(out), _numpy(out_reordered)
    low = min(out.min(), out_reordered.min())
    high = max(out.max(), out_reordered.max())
    fig, axes = plt.subplots(1, 3, figsize=(12, 2.8))
    for ax, matrix, name in ((axes[0], out, "original sentence"),
                             (axes[1], out_reordered, "reversed sentence, rows put back")):
        heatmap(matrix, labels, None, title=name, xlabel="feature", ylabel="token", ax=ax,
                annotate=False, cmap="coolwarm", vmin=low, vmax=high)
    heatmap(abs(out_reordered - out), labels, None, title="|difference|", xlabel="feature",
            ylabel="token", ax=axes[2], annotate=False, cmap="Reds", vmin=0.0, vmax=vmax)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def loss_curves(losses: Mapping[str, Sequence[float]], *, blind: float | None = None, smooth: int = 10,
                title="Training loss", ax=None):
    """The loss of every step for several runs (one curve each, a running mean of ``smooth`` steps).

    ``blind``, when given, is drawn as a dashed line: the loss of the best guess that ignores
    the input, which a run that learns nothing about its input stays at.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    for label, values in losses.items():
        window, mean = moving_mean(values, smooth)
        ax.plot(range(window, len(values) + 1), mean.numpy(), label=label)
    if blind is not None:
        ax.axhline(blind, color="gray", linestyle="--", label="blind guess (ignores the input)")
    ax.set_title(title)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"loss (mean of {smooth} steps)" if smooth > 1 else "loss")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right")
    return ax


def similarity_heatmap(pe, *, title="pe[p] · pe[q]: it depends only on p − q", ax=None):
    """Dot products between the encodings of every pair of positions."""
    values = _numpy(pe @ pe.T)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 4))
    image = ax.imshow(values, cmap="viridis", aspect="equal", interpolation="nearest")
    ax.set_title(title)
    ax.set_xlabel("position q")
    ax.set_ylabel("position p")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="dot product")
    return ax


def accuracy_by_position(accuracy: Mapping[str, Sequence[float]], *, start: int, train_len: int,
                         chance: float | None = None, smooth: int = 4,
                         title="Accuracy at each position of sequences longer than in training",
                         ax=None):
    """Accuracy per position for several models (one curve each, a running mean of ``smooth``).

    ``accuracy[label][j]`` is the accuracy at position ``start + j``; a dashed line marks the
    longest sequence seen in training, a dotted one the accuracy of guessing.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    for label, values in accuracy.items():
        window, mean = moving_mean(values, smooth)
        ax.plot(range(start + window - 1, start + len(values)), mean.numpy(), label=label)
    ax.axvline(train_len - 0.5, color="gray", linestyle="--",
               label=f"longest training sequence ({train_len})")
    if chance is not None:
        ax.axhline(chance, color="gray", linestyle=":", label="guessing")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("position in the test sequence")
    ax.set_ylabel(f"accuracy (mean of {smooth} positions)" if smooth > 1 else "accuracy")
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return ax
