"""Figures used across the course, drawn with matplotlib."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch


def _as_array(matrix):
    """A 2-D tensor or array as a CPU numpy array."""
    if isinstance(matrix, torch.Tensor):
        return matrix.detach().float().cpu().numpy()
    return matrix


def heatmap(
    matrix,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    ax=None,
    annotate: bool = True,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
):
    """Draw a 2-D matrix as a heatmap with labelled rows and columns; returns the axes."""
    values = _as_array(matrix)
    if ax is None:
        _, ax = plt.subplots(figsize=(1 + 0.6 * values.shape[1], 1 + 0.5 * values.shape[0]))
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(values.shape[1]), labels=col_labels or range(values.shape[1]))
    ax.set_yticks(range(values.shape[0]), labels=row_labels or range(values.shape[0]))
    if col_labels is not None:
        ax.tick_params(axis="x", labelrotation=45)
    if annotate and values.size <= 120:
        for (i, j), v in _cells(values):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="white")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def _cells(values):
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            yield (i, j), float(values[i, j])


def attention_map(weights, query_labels, key_labels, *, title="Attention weights", ax=None):
    """Attention weights (n_q, n_k) as a heatmap: rows are queries, columns are keys."""
    return heatmap(
        weights, query_labels, key_labels, title=title,
        xlabel="key (attended to)", ylabel="query (attending)", ax=ax, vmin=0.0, vmax=1.0,
    )


def matrices_side_by_side(matrices: Mapping[str, torch.Tensor], row_labels, *, title=""):
    """Several matrices with the same rows (e.g. X, Q, K, V of the tokens) in one figure."""
    fig, axes = plt.subplots(1, len(matrices), figsize=(3.2 * len(matrices), 2.8))
    for ax, (name, matrix) in zip(axes, matrices.items()):
        heatmap(matrix, row_labels, None, title=name, xlabel="feature", ax=ax,
                annotate=False, cmap="coolwarm")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def attention_maps_per_head(weights, query_labels, key_labels, *, title="One map per head"):
    """Weights (h, n_q, n_k): one heatmap per head, side by side."""
    num_heads = weights.shape[0]
    fig, axes = plt.subplots(1, num_heads, figsize=(3.2 * num_heads, 3.2), squeeze=False)
    for h, ax in enumerate(axes[0]):
        attention_map(weights[h], query_labels, key_labels, title=f"head {h}", ax=ax)
        if h:
            ax.set_ylabel("")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
