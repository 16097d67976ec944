"""Figures used across the course, drawn with matplotlib."""

from __future__ import annotations

import time
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
    colorbar: bool = True,
):
    """Draw a 2-D matrix as a heatmap with labelled rows and columns; returns the axes."""
    values = _as_array(matrix)
    if ax is None:
        _, ax = plt.subplots(figsize=(1 + 0.6 * values.shape[1], 1 + 0.5 * values.shape[0]))
    image = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(values.shape[1]), labels=col_labels or range(values.shape[1]))
    ax.set_yticks(range(values.shape[0]), labels=row_labels or range(values.shape[0]))
    if col_labels is not None:  # slanted, each label ending under its column
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    if annotate and values.size <= 120:
        for (i, j), v in _cells(values):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color=text_colour(image, v))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def text_colour(image, value: float) -> str:
    """Black on light cells (the yellow end of viridis), white on dark ones."""
    red, green, blue, _ = image.cmap(image.norm(value))
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


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
    """Weights (h, n_q, n_k): one heatmap per head, side by side, sharing the query labels (on the
    left) and one colour bar (on the right), so that no label runs into a neighbour."""
    values = _as_array(weights)
    num_heads = values.shape[0]
    fig, axes = plt.subplots(1, num_heads, figsize=(2.6 * num_heads + 1.6, 3.4), squeeze=False,
                             sharey=True, layout="constrained")
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(values[h], cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(values.shape[2]), labels=key_labels, rotation=45, ha="right",
                      rotation_mode="anchor")
        ax.set_yticks(range(values.shape[1]), labels=query_labels)
        ax.set_title(f"head {h}")
        ax.set_xlabel("key")
        if values.shape[1] * values.shape[2] <= 36:
            for (i, j), v in _cells(values[h]):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color=text_colour(image, v))
    axes[0][0].set_ylabel("query")
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.03, pad=0.02, label="weight")
    fig.suptitle(title)
    return fig


def seconds_per_call(function, *args, min_run_time: float = 0.05) -> float:
    """Median seconds per call of ``function(*args)``, measured by ``torch.utils.benchmark``
    (warm-up, blocks of calls long enough for the clock, one CPU thread)."""
    from torch.utils import benchmark  # here, not at load: it warns on a CUDA build without a GPU

    timer = benchmark.Timer(stmt="function(*args)", globals={"function": function, "args": args})
    return timer.blocked_autorange(min_run_time=min_run_time).median


def measure_attention_cost(attention, lengths: Sequence[int], *, d: int = 64, min_run_time: float = 0.05,
                           max_call_s: float = 0.5) -> dict[str, list]:
    """Seconds per call of ``attention(Q, K, V)`` and of PyTorch's fused attention (one CPU
    thread, by ``torch.utils.benchmark``), and the size (MB) of the weights ``attention``
    returns and of Q, K, V, for each length n.

    Lengths stop growing once one call of ``attention`` takes more than ``max_call_s``
    (a loop-based attention would otherwise run for minutes); ``lengths`` in the result
    says which were measured.
    """
    import torch.nn.functional as F

    cost = {"lengths": [], "yours_s": [], "fused_s": [], "weights_mb": [], "inputs_mb": []}
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n in lengths:
            # (1, 1, n, d): one head of one sentence, 4-D as inside multi-head attention, the
            # layout for which PyTorch runs its fused (flash) kernel on the CPU too
            Q, K, V = (torch.randn(1, 1, n, d, generator=generator) for _ in range(3))
            start = time.perf_counter()
            _, weights = attention(Q, K, V)  # weights: (1, 1, n, n)
            first_call_s = time.perf_counter() - start
            too_slow = first_call_s > max_call_s
            cost["lengths"].append(n)
            cost["weights_mb"].append(weights.nelement() * weights.element_size() / 2**20)
            cost["inputs_mb"].append(3 * Q.nelement() * Q.element_size() / 2**20)
            cost["yours_s"].append(first_call_s if too_slow else
                                   seconds_per_call(attention, Q, K, V, min_run_time=min_run_time))
            cost["fused_s"].append(seconds_per_call(F.scaled_dot_product_attention, Q, K, V,
                                                    min_run_time=min_run_time))
            if too_slow:
                break
    return cost


def attention_cost(attention, lengths: Sequence[int] = (64, 128, 256, 512, 1024, 2048), *,
                   d: int = 64, min_run_time: float = 0.05):
    """Figure: time and memory of ``attention(Q, K, V)`` against the sequence length n.

    ``attention`` returns ``(output, weights)`` like the course's
    ``scaled_dot_product_attention``. PyTorch's fused ``F.scaled_dot_product_attention``
    is timed beside it. Both panels are log-log, so growth like n^2 is a straight line of
    slope 2 (the dotted guide on the left; the weights on the right).
    """
    return attention_cost_figure(measure_attention_cost(attention, lengths, d=d, min_run_time=min_run_time))


def attention_cost_figure(cost: Mapping[str, list]):
    """The figure of ``attention_cost`` for what ``measure_attention_cost`` returned."""
    lengths = cost["lengths"]  # those measured

    fig, (ax_time, ax_memory) = plt.subplots(1, 2, figsize=(10, 3.6))
    for label, key in (("yours", "yours_s"), ("F.scaled_dot_product_attention", "fused_s")):
        ax_time.loglog(lengths, [s * 1e3 for s in cost[key]], "o-", label=label)
    _n_squared_guide(ax_time, lengths, cost["yours_s"][-1] * 1e3)
    ax_time.set(title="Time per call (one CPU thread)", xlabel="sequence length n", ylabel="milliseconds")
    ax_memory.loglog(lengths, cost["weights_mb"], "o-", label="weights (n × n)")
    ax_memory.loglog(lengths, cost["inputs_mb"], "s-", label="Q, K, V (3 × n × d)")
    ax_memory.set(title="Memory", xlabel="sequence length n", ylabel="MB (float32)")
    for ax in (ax_time, ax_memory):
        ax.set_xticks(lengths, [str(n) for n in lengths], minor=False)
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _n_squared_guide(ax, lengths: Sequence[int], last_value: float) -> None:
    """A dotted line growing like n^2 that ends at (lengths[-1], last_value)."""
    top = lengths[-1]
    ax.loglog(lengths, [last_value * (n / top) ** 2 for n in lengths], "k:", label="∝ n²")
