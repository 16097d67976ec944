"""Figures and small tools for 10.6 (the encoder-decoder translator)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

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
def captured_attention(attention: nn.Module, reduce: Callable[[torch.Tensor], object] | None = None
                       ) -> Iterator[list]:
    """Collect the weights that an attention module returns, for every call inside the block.

    ``attention`` is a module whose forward returns ``(output, weights)``, such as a
    ``MultiHeadAttention``; the list receives one detached ``weights`` tensor per call, or
    ``reduce(weights)`` when ``reduce`` is given (such as :func:`sharpness`, to follow a
    training run without keeping every map)::

        with captured_attention(model.decoder_layers[-1].cross_attn) as maps:
            model(src, tgt)
        weights = maps[-1]  # (B, h, n_tgt, n_src)
    """
    maps: list = []

    def keep(module, inputs, outputs):
        weights = outputs[1].detach()
        maps.append(weights.cpu() if reduce is None else reduce(weights))

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
    mean_ax.set_ylabel("English word read (the decoder writes the next)")
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


def attention_grid(maps: Mapping[str, torch.Tensor],
                   labels: Mapping[str, tuple[Sequence[str], Sequence[str]]], *,
                   title: str = "Every attention layer and head"):
    """One row per attention layer, one column per head: ``maps[name]`` is (h, n_q, n_k) and
    ``labels[name]`` the (query words, key words) of that layer."""
    names = list(maps)
    num_heads = max(m.shape[0] for m in maps.values())
    fig, axes = plt.subplots(len(names), num_heads, squeeze=False,
                             figsize=(2.3 * num_heads + 1.2, 2.1 * len(names) + 0.6))
    for row, name in enumerate(names):
        queries, keys = labels[name]
        for h in range(num_heads):
            ax = axes[row][h]
            ax.imshow(maps[name][h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(keys)), labels=keys, rotation=90, fontsize=6)
            ax.set_yticks(range(len(queries)), labels=queries if h == 0 else [""] * len(queries),
                          fontsize=6)
            if row == 0:
                ax.set_title(f"head {h}", fontsize=9)
        axes[row][0].set_ylabel(name, fontsize=9)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def ablation_figure(losses: Mapping[str, Sequence[float]], scores: Mapping[str, Mapping[str, float]],
                    *, floor: float | None = None, title: str = "The same budget, one ingredient taken out"):
    """Left: each variant's training loss (running mean of 20 steps). Right: its held-out exact
    match, one group of bars per variant and one bar per held-out set. ``floor``: the lowest
    loss label smoothing allows."""
    fig, (ax_loss, ax_score) = plt.subplots(1, 2, figsize=(12, 3.8),
                                            gridspec_kw={"width_ratios": [1, 1.3]})
    for name, values in losses.items():
        values = torch.tensor(list(values), dtype=torch.float64)
        window = min(20, len(values))
        smooth = values.unfold(0, window, 1).mean(dim=1)
        ax_loss.plot(range(window - 1, len(values)), smooth.numpy(), label=name)
    if floor is not None:
        ax_loss.axhline(floor, color="gray", linestyle="--", label="lowest loss with label smoothing")
    ax_loss.set(yscale="log", xlabel="training step", ylabel="training loss (cross-entropy)",
                title="Training loss (mean of 20 steps)")
    ax_loss.legend(fontsize=7)
    names, splits = list(scores), list(next(iter(scores.values())))
    width = 0.8 / len(splits)
    for i, split in enumerate(splits):
        xs = [j + (i - (len(splits) - 1) / 2) * width for j in range(len(names))]
        values = [100 * scores[name][split] for name in names]
        bars = ax_score.bar(xs, values, width, label=split)
        ax_score.bar_label(bars, fmt="%.0f", fontsize=7)
    ax_score.set_xticks(range(len(names)), labels=names, rotation=20, ha="right", fontsize=8)
    ax_score.set(ylim=(0, 110), ylabel="exact match (%)", title="Held-out sentences translated exactly")
    ax_score.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig



# ---------------------------------------------------------------- overfitting


def teacher_forced_loss(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, pad_id: int) -> float:
    """The mean cross-entropy per scored target word of one batch, as ``train_step`` scores it
    (reads ``tgt`` without its last token, predicts it without its first, padding targets left out),
    with dropout off and without label smoothing. Leaves the model in ``eval()`` mode."""
    model.eval()
    with torch.no_grad():
        logits = model(src, tgt[:, :-1]).double()  # (B, n - 1, V)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=pad_id).item()


def overfitting_figure(curves: Mapping[str, Sequence[tuple[int, float, float]]], *,
                       title: str = "Training loss falls; validation loss says whether it generalises"):
    """One colour per run: its loss on training pairs (solid) and on validation pairs (dashed),
    from ``(step, training loss, validation loss)`` points; a dot at each run's lowest
    validation loss. A linear scale, so that a validation loss turning up shows."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for colour, (name, points) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], curves.items()):
        steps, seen, unseen = zip(*points)
        ax.plot(steps, seen, color=colour, label=f"{name}: training")
        ax.plot(steps, unseen, color=colour, linestyle="--", label=f"{name}: validation")
        best = min(range(len(unseen)), key=unseen.__getitem__)
        ax.plot(steps[best], unseen[best], "o", color=colour)
    ax.set(ylim=(0, None), xlabel="training step", ylabel="cross-entropy per word", title=title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- attention maps in words


def sharpness(weights: torch.Tensor) -> tuple[float, float]:
    """How peaked attention weights (..., n_q, n_k) are: the largest weight of each query row
    and the entropy of the row (nats), each averaged over every row. A uniform row over n
    keys gives 1/n and log n; a saturated softmax, 1 and 0. Masked keys (weight 0) add nothing."""
    weights = weights.double()
    entropy = -torch.special.xlogy(weights, weights).sum(dim=-1)  # (..., n_q)
    return weights.amax(dim=-1).mean().item(), entropy.mean().item()


def strongest_keys(weights: torch.Tensor, query_words: Sequence[str], key_words: Sequence[str]) -> list[str]:
    """One line per query of ``weights`` (h, n_q, n_k): the key with the most weight on average
    over the heads, that mean weight, and the heads whose own largest weight is on it."""
    mean = weights.mean(dim=0)  # (n_q, n_k)
    best, per_head = mean.argmax(dim=-1), weights.argmax(dim=-1)  # (n_q,), (h, n_q)
    lines = []
    for i, word in enumerate(query_words):
        j = int(best[i])
        heads = [str(h) for h in range(weights.shape[0]) if per_head[h, i] == j]
        named = f" ({', '.join(heads)})" if heads else ""
        lines.append(f"{word:>10} -> {key_words[j]:<9} mean weight {mean[i, j]:.2f}; the largest weight of "
                     f"{len(heads)} of {weights.shape[0]} heads{named}")
    return lines


def weight_shares(weights: torch.Tensor, words: Sequence[str], special=("<bos>", "<eos>")) -> list[str]:
    """One line per head of a self-attention ``weights`` (h, n, n) over ``words``: of the weight of the
    ordinary words' rows (the ``special`` tokens' own rows left out), the share on the ``special``
    keys and the share on the word itself, each averaged over those rows; and the strongest link
    between two different ordinary words."""
    is_special = torch.tensor([w in special for w in words])  # (n,)
    ordinary = ~is_special[:, None] & ~is_special[None, :] & ~torch.eye(len(words), dtype=torch.bool)
    lines = []
    for h, head in enumerate(weights.double()):  # (n, n)
        link = head.masked_fill(~ordinary, -1.0)
        i, j = divmod(int(link.argmax()), len(words))
        rows = head[~is_special]  # (n_words, n): the ordinary words' rows
        on_special = rows[:, is_special].sum(dim=-1).mean()
        on_itself = head.diagonal()[~is_special].mean()
        lines.append(f"head {h}: {on_special:.0%} of the weight on {'/'.join(special)}, {on_itself:.0%} on "
                     f"the word itself; strongest link between two words: {words[i]} -> {words[j]} "
                     f"({head[i, j]:.2f})")
    return lines
