"""Tools for the decoding section of 10.6: counting what a layer processes, timing decoders."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from torch import nn


@contextlib.contextmanager
def positions_per_call(module: nn.Module) -> Iterator[list[int]]:
    """For every call of ``module`` inside the block, the number of positions it processed.

    A position of one sentence is one row of the input: ``B * n`` for an input (B, n, d)::

        with positions_per_call(model.decoder_layers[0].self_attn.w_k) as calls:
            greedy_decode(model, src, BOS, EOS, 10)
        calls  # [B, 2 * B, 3 * B, ...] without a cache; [B, B, B, ...] with one
    """
    calls: list[int] = []

    def count(layer, inputs, output):
        x = inputs[0] if inputs else None  # None: called with keyword arguments only
        if isinstance(x, torch.Tensor):
            calls.append(x.numel() // x.shape[-1] if x.dim() else 1)

    handle = module.register_forward_hook(count)
    try:
        yield calls
    finally:
        handle.remove()


def time_decoders(decoders: Mapping[str, Callable], model: nn.Module, src: torch.Tensor,
                  lengths: Sequence[int], *, bos_id: int = 1, min_run_time: float = 0.2,
                  threads: int = 1) -> dict:
    """Seconds per call of each ``decoder(model, src, bos_id, eos_id, max_len)`` for every
    output length in ``lengths``, measured with ``torch.utils.benchmark``.

    ``eos_id`` is an id the model cannot predict (its vocabulary size), so every sentence
    runs to ``max_len`` tokens and both decoders do the same amount of work.
    """
    from torch.utils import benchmark

    never = model.out.out_features  # one past the last id of the vocabulary
    seconds: dict[str, list[float]] = {name: [] for name in decoders}
    for n in lengths:
        for name, decode in decoders.items():
            timer = benchmark.Timer(
                "decode(model, src, bos_id, eos_id, max_len)", num_threads=threads,
                globals={"decode": decode, "model": model, "src": src, "bos_id": bos_id,
                         "eos_id": never, "max_len": n})
            seconds[name].append(timer.blocked_autorange(min_run_time=min_run_time).median)
    return {"lengths": list(lengths), "seconds": seconds, "batch": src.shape[0], "threads": threads}


def decoding_times(times: Mapping, *, title: str = "Greedy decoding with and without a cache"):
    """Left: time per translation batch against the output length (log-log). Right: how many
    times faster the first decoder is than the second, at each length."""
    lengths, seconds = times["lengths"], times["seconds"]
    fig, (ax_time, ax_ratio) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, values in seconds.items():
        ax_time.loglog(lengths, [s * 1e3 for s in values], "o-", label=name)
    ax_time.set(title=f"One batch of {times['batch']} sentences", xlabel="output length (tokens)",
                ylabel="milliseconds")
    (slow, slow_s), (fast, fast_s) = list(seconds.items())[:2]
    ratios = [a / b for a, b in zip(slow_s, fast_s)]
    ax_ratio.plot(lengths, ratios, "o-", color="tab:green")
    for n, r in zip(lengths, ratios):
        ax_ratio.annotate(f"{r:.1f}×", (n, r), textcoords="offset points", xytext=(0, 6), ha="center")
    ax_ratio.set(title=f"{slow} / {fast}", xlabel="output length (tokens)", ylabel="times faster",
                 ylim=(0, max(ratios) * 1.25))
    ax_ratio.set_xscale("log")
    for ax in (ax_time, ax_ratio):
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
    ax_time.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
