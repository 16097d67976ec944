"""Benchmarks of the course: ``python -m bench`` (or ``make bench``).

Measures, in one run on the current machine, and writes ``bench/report.json`` and
``bench/report.md``:

* ``notebooks``: each solution notebook start to finish (kernel start included) and the
  kernel's peak memory (:mod:`bench.notebooks`);
* ``autograde``: stock serial ``nbgrader autograde`` against ``python -m grader autograde
  --jobs 2`` and ``--jobs 1`` on the same mixed class, CPU seconds by phase on both sides,
  the sandbox's cost per notebook, and grading's overhead over plain execution
  (:mod:`bench.autograde`);
* ``checks``: the hidden checks' CPU seconds per notebook, in a fresh process
  (:mod:`bench.checks`);
* ``modules``: the course's modules against PyTorch's, forward plus backward
  (:mod:`bench.modules`);
* ``decoding``: greedy decoding with and without a cache of keys and values
  (:mod:`bench.decoding`);
* ``scaling``: attention's time and memory against sequence length (:mod:`bench.scaling`);
* ``host``: the grader's own CPU and memory per submission for classes of 50 to 5,000
  (:mod:`bench.host_scale`).

A benchmark, not a test: every figure is a median of repeated runs measured side by side
in the same process, after a warm-up, with the same number of threads on both sides.
"""

from pathlib import Path

from samples import ROOT  # noqa: F401 - the checkout, for the parts

BENCH_DIR = Path(__file__).resolve().parent


def cpu_seconds() -> float:
    """CPU time of this process and of every finished process it started (kernels included)."""
    import resource

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
