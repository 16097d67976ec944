"""Run pytest on a tier of the suite, print its 25 slowest tests and its CPU seconds (user + sys of
every process of the run, the pytest-xdist workers included), and fail past the tier's budget in
tests/budget.toml.

    python scripts/timed_tests.py fast -n 2 -m "not slow and not browser"

CPU seconds, not wall time: they change far less with the machine's load (a 2-core machine at
load 5 adds about a quarter; the load average is printed). Machines differ in speed (up to 3x),
so the budget is scaled by this machine's speed, measured in the same run: the CPU seconds of
a fixed workload like the suite's (:func:`calibrate`) against the reference machine's, recorded
beside the budget. A tier over its budget fails even when its tests pass: find what grew in the
printed slowest tests, or raise the budget in tests/budget.toml in the same commit, saying why.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = ROOT / "tests" / "budget.toml"


def budget(tier: str) -> float:
    """The tier's budget in CPU seconds on the reference machine, from tests/budget.toml."""
    budgets = tomllib.loads(BUDGETS.read_text())
    tiers = sorted(name for name in budgets if name != "reference")
    if tier not in tiers:
        raise SystemExit(f"{BUDGETS.relative_to(ROOT)} has no [{tier}] budget; it has {tiers}")
    return float(budgets[tier]["cpu_seconds"])


def reference_calibration() -> float:
    """:func:`calibrate`'s CPU seconds on the machine the budgets were measured on."""
    return float(tomllib.loads(BUDGETS.read_text())["reference"]["calibration_seconds"])


def calibrate() -> float:
    """CPU seconds of a fixed workload like the suite's, small tensor operations driven from Python
    (one thread; the best of three)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))  # (64, 64)
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            y = x
            for _ in range(12_000):
                y = torch.tanh(y @ x / 8)  # (64, 64)
            sum(i * i for i in range(1_000_000))
            best = min(best, time.process_time() - start)
        return best
    finally:
        torch.set_num_threads(threads)


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tier", help="a table of tests/budget.toml: fast, slow")
    options, pytest_args = parser.parse_known_args(argv)
    speed = calibrate() / reference_calibration()  # above 1: a slower machine than the reference
    limit = budget(options.tier) * speed
    before, load = children_cpu(), os.getloadavg()[0]
    code = subprocess.call([sys.executable, "-m", "pytest", "--durations=25", *pytest_args], cwd=ROOT)
    used = children_cpu() - before
    print(f"\n{options.tier} tier: {used:.0f} CPU seconds (user + sys), budget {limit:.0f} "
          f"({budget(options.tier):.0f} in {BUDGETS.relative_to(ROOT)} x {speed:.2f}, this machine's "
          f"time for the calibration workload over the reference's); load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    if code == 0 and used > limit:
        print(f"{options.tier} tier over its budget by {used - limit:.0f} CPU seconds: see the slowest "
              "tests above", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
