"""How attention's cost grows with the sequence length: the course's against PyTorch's.

For each length n (one head of width 64, batch 1, forward pass without gradients):

* time: median of repeated calls, both implementations timed in alternating rounds;
* memory: the peak of the memory the call allocates on top of its inputs. On CUDA that is
  ``torch.cuda.max_memory_allocated``; on the CPU it is replayed from the allocator's
  events recorded by ``torch.profiler`` (``profile_memory=True``): every allocation and
  free in order, summed, maximum taken. Exact, not sampled.

The growth exponent is the slope of a least-squares line through (log n, log cost) over
the larger lengths, where fixed per-call overheads no longer dominate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench.timing import interleaved_medians, synchronize

LENGTHS = (128, 256, 512, 1024, 2048, 4096)
FIT_FROM = 512  # lengths below are dominated by per-call overhead


def course_attention() -> Callable:
    """The 10.2 solution's ``scaled_dot_product_attention`` (returns output and weights)."""
    from samples import load_solution_namespace

    return load_solution_namespace("10.2-scaled-dot-product-attention")["scaled_dot_product_attention"]


def peak_extra_mb(fn: Callable[[], object], device: torch.device) -> float:
    """Peak memory (MB) that one call of ``fn`` allocates beyond what already exists."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        synchronize(device)
        del result
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
        del result
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()  # negative for a free
        peak = max(peak, current)
    return peak / 2**20


def fit_exponent(lengths: list[int], values: list[float], fit_from: int = FIT_FROM) -> float | None:
    """Slope of log(value) against log(length) over lengths >= ``fit_from`` (least squares)."""
    points = [(n, v) for n, v in zip(lengths, values) if n >= fit_from and v and v > 0]
    if len(points) < 2:
        return None
    x = np.log([n for n, _ in points])
    y = np.log([v for _, v in points])
    return float(np.polyfit(x, y, 1)[0])


def local_exponents(lengths: list[int], values: list[float]) -> list[float | None]:
    """Slope between neighbouring lengths: where the growth steepens (caches running out)."""
    return [_round(math.log(b / a) / math.log(m / n)) if a > 0 and b > 0 else None
            for n, m, a, b in zip(lengths, lengths[1:], values, values[1:])]


def bench_scaling(lengths: tuple[int, ...] = LENGTHS, d: int = 64, heads: int = 1,
                  repeats: int = 5, device: torch.device | str = "cpu",
                  fit_from: int = FIT_FROM, log=print) -> dict:
    """Series and fitted exponents, keyed ``{"course": {...}, "torch_sdpa": {...}}``."""
    device = torch.device(device)
    course = course_attention()
    impls = {"course": course, "torch_sdpa": F.scaled_dot_product_attention}
    series: dict[str, dict[str, list]] = {name: {"seconds": [], "peak_mb": []} for name in impls}
    generator = torch.Generator().manual_seed(0)
    for n in lengths:
        qkv = [torch.randn(1, heads, n, d, generator=generator).to(device) for _ in range(3)]
        calls = {name: (lambda f=f, qkv=qkv: f(*qkv)) for name, f in impls.items()}
        with torch.no_grad():
            # Enough calls per timed round for ~20 ms, so short calls are not all timer noise.
            probe = interleaved_medians(calls, repeats=1, warmup=1, device=device)
            inner = {name: max(1, math.ceil(0.02 / max(p["median_s"], 1e-6)))
                     for name, p in probe.items()}
            timed = interleaved_medians(calls, repeats=repeats, warmup=0,
                                        inner=min(inner.values()), device=device)
            for name, call in calls.items():
                series[name]["seconds"].append(timed[name]["median_s"])
                series[name]["peak_mb"].append(peak_extra_mb(call, device))
        log(f"  scaling n={n}: " + ", ".join(
            f"{name} {series[name]['seconds'][-1] * 1e3:.2f} ms {series[name]['peak_mb'][-1]:.1f} MB"
            for name in impls))
        del qkv, calls
    report = {}
    for name, s in series.items():
        report[name] = {
            "lengths": list(lengths),
            "seconds": [round(t, 6) for t in s["seconds"]],
            "peak_mb": [round(m, 3) for m in s["peak_mb"]],
            "exponent": _round(fit_exponent(list(lengths), s["seconds"], fit_from)),
            "local_exponents": local_exponents(list(lengths), s["seconds"]),
            "memory_exponent": _round(fit_exponent(list(lengths), s["peak_mb"], fit_from)),
        }
    report["setup"] = {"d": d, "heads": heads, "batch": 1, "pass": "forward, no grad",
                       "fit_from_length": fit_from, "repeats": repeats, "device": str(device)}
    return report


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def plot(report: dict, path: Path) -> Path:
    """Log-log figure of time and memory against length for both implementations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=100)
    labels = {"course": "course (10.2)", "torch_sdpa": "F.scaled_dot_product_attention"}
    for name, label in labels.items():
        s = report[name]
        ax_t.loglog(s["lengths"], [t * 1e3 for t in s["seconds"]], "o-", base=2,
                    label=f"{label}: n^{s['exponent']}")
        memory = [(n, m) for n, m in zip(s["lengths"], s["peak_mb"]) if m > 0]
        if memory:
            ax_m.loglog(*zip(*memory), "o-", base=2, label=f"{label}: n^{s['memory_exponent']}")
    setup = report["setup"]
    ax_t.set(xlabel="sequence length n", ylabel="time per call (ms)",
             title=f"time, d={setup['d']}, {setup['device']}")
    ax_m.set(xlabel="sequence length n", ylabel="peak extra memory (MB)", title="memory")
    for ax in (ax_t, ax_m):
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
