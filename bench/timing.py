"""Timing helpers shared by the benchmarks: warm-up, repeats, medians, device sync."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch


def synchronize(device: torch.device | str) -> None:
    """Wait for queued kernels on ``device`` (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 2,
                   inner: int = 1, device: torch.device | str = "cpu") -> dict:
    """Median wall time of one call of ``fn`` over ``repeats`` timed rounds.

    Each round times ``inner`` back-to-back calls (for calls too short to time alone) and
    divides; ``warmup`` untimed calls come first. Returns the median and every sample.
    """
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        synchronize(device)
        samples.append((time.perf_counter() - start) / inner)
    return {"median_s": statistics.median(samples), "samples_s": samples}


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int = 7, warmup: int = 2,
                        inner: int = 1, device: torch.device | str = "cpu") -> dict[str, dict]:
    """Like :func:`median_seconds` for several functions, timed in alternating rounds.

    Alternating (A, B, A, B, ...) instead of (A, A, ..., B, B, ...) spreads a burst of load
    from other processes over both sides, so the ratio of the medians stays fair on a busy
    machine.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    synchronize(device)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            synchronize(device)
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: {"median_s": statistics.median(s), "samples_s": s} for name, s in samples.items()}


def calls_per_round(fns: dict[str, Callable[[], object]], round_s: float = 0.05,
                    device: torch.device | str = "cpu") -> int:
    """How many back-to-back calls make a timed round of about ``round_s`` for the fastest."""
    probe = interleaved_medians(fns, repeats=1, warmup=1, device=device)
    fastest = min(p["median_s"] for p in probe.values())
    return max(1, math.ceil(round_s / max(fastest, 1e-7)))
