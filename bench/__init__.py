"""Benchmarks of the course: ``python -m bench`` (or ``make bench``).

Measures, in one run on the current machine, and writes ``bench/report.json`` and
``bench/report.md``:

* ``notebooks``: each solution notebook start to finish (kernel start included) and the
  kernel's peak memory (:mod:`bench.notebooks`);
* ``autograde``: stock serial ``nbgrader autograde`` against ``python -m grader autograde
  --jobs 2`` on the same mixed class, and grading's overhead over plain execution
  (:mod:`bench.autograde`);
* ``modules``: the course's modules against PyTorch's, forward plus backward
  (:mod:`bench.modules`);
* ``scaling``: attention's time and memory against sequence length (:mod:`bench.scaling`).

A benchmark, not a test: every figure is a median of repeated runs measured side by side
in the same process, after a warm-up, with the same number of threads on both sides.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent

if str(ROOT) not in sys.path:  # the solutions are loaded with tests/notebook_code.py
    sys.path.insert(0, str(ROOT))
