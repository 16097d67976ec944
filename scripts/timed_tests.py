"""Run pytest on a tier of the suite, print its 25 slowest tests and its CPU seconds (user + sys of
every process of the run, the pytest-xdist workers included), and fail past the tier's budget in
tests/budget.toml.

    python scripts/timed_tests.py fast -n 2 -m "not slow and not browser"

CPU seconds, not wall time: they change far less with the machine's load (a 2-core machine at
load 5 adds about a quarter; the load average is printed). A tier over its budget fails even
when its tests pass: find what grew in the printed slowest tests, or raise the budget in
tests/budget.toml in the same commit, saying why.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
BUDGETS = ROOT / "tests" / "budget.toml"


def budget(tier: str) -> float:
    """The tier's budget in CPU seconds, from tests/budget.toml."""
    budgets = tomllib.loads(BUDGETS.read_text())
    if tier not in budgets:
        raise SystemExit(f"{BUDGETS.relative_to(ROOT)} has no [{tier}] budget; it has {sorted(budgets)}")
    return float(budgets[tier]["cpu_seconds"])


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tier", help="a table of tests/budget.toml: fast, slow")
    options, pytest_args = parser.parse_known_args(argv)
    limit = budget(options.tier)
    before, load = children_cpu(), os.getloadavg()[0]
    code = subprocess.call([sys.executable, "-m", "pytest", "--durations=25", *pytest_args], cwd=ROOT)
    used = children_cpu() - before
    print(f"\n{options.tier} tier: {used:.0f} CPU seconds (user + sys), budget {limit:.0f} "
          f"({BUDGETS.relative_to(ROOT)}); load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end")
    if code == 0 and used > limit:
        print(f"{options.tier} tier over its budget by {used - limit:.0f} CPU seconds: see the slowest "
              "tests above", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
