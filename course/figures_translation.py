"""Figures and small tools for 10.6 (the encoder-decoder translator)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import matplotlib.pyplot as plt
import torch
from torch import nn

from course.plotting import attention_map, heatmap


def loss_curve(losses: Sequence[float], *, title="Training loss", ax=None):
    """The loss of every training step (log scale) with a running mean over 20 steps."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    values = torch.tensor(list(losses), dtype=torch.float64)
    ax.plot(values.numpy(), color="tab:blue", alpha=0.35, label="one batch")
    window = min(20, len(values))
    if window > 1:
        smooth = values.unfold(0, window, 1).mean(dim=1)  # (len - window + 1,)
        ax.plot(range(window - 1, len(values)), smooth.numpy(), color="tab:blue",
                label=f"mean of {window} steps")
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy")
    ax.set_title(title)
    ax.legend()
    return ax


@contextlib.contextmanager
def captured_attention(attention: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Collect the weights that an attention module returns, for every call inside the block.

    ``attention`` is a module whose forward returns ``(output, weights)``, such as a
    ``MultiHeadAttention``; the list receives one detached ``weights`` tensor per call::

        with captured_attention(model.decoder_layers[-1].cross_attn) as maps:
            model(src, tgt)
        weights = maps[-1]  # (B, h, n_tgt, n_src)
    """
    maps: list[torch.Tensor] = []

    def keep(module, inputs, outputs):
        maps.append(outputs[1].detach().cpu())

    handle = attention.register_forward_hook(keep)
    try:
        yield maps
    finally:
        handle.remove()


def cross_attention_maps(weights, source_words: Sequence[str], target_words: Sequence[str], *,
                         title="Cross-attention of the last decoder block"):
    """Weights (h, n_tgt, n_src): the mean over the heads (large, with values), then each head."""
    num_heads = weights.shape[0]
    rows = (num_heads + 1) // 2
    fig = plt.figure(figsize=(12, 2.6 * max(2, rows)))
    grid = fig.add_gridspec(rows, 4)
    mean_ax = fig.add_subplot(grid[:, :2])
    attention_map(weights.mean(dim=0), target_words, source_words, title="mean of the heads",
                  ax=mean_ax)
    mean_ax.set_xlabel("French word (key)")
    mean_ax.set_ylabel("English word being produced")
    for h in range(num_heads):
        ax = fig.add_subplot(grid[h // 2, 2 + h % 2])
        heatmap(weights[h], target_words if h % 2 == 0 else None, source_words, title=f"head {h}", ax=ax,
                annotate=False, vmin=0.0, vmax=1.0, colorbar=False)
        ax.tick_params(labelsize=7)
        if h % 2:
            ax.set_yticks(range(len(target_words)), labels=[])  # the left panel names the rows
        if h < num_heads - 2:
            ax.set_xticks(range(len(source_words)), labels=[])  # the bottom panels name the columns
    fig.suptitle(title)
    fig.tight_layout()
    return fig
