"""The host's cost per submission as the class grows (``python -m bench --only host``).

Synthetic classes of 50, 500 and 5,000 submissions go through the real host side of
``python -m grader autograde``: discovery, fingerprints, the pool of worker processes and
its pipes, the results, grades.csv, the manifest. Only the kernel's work is replaced:
the workers grade with :class:`StandIn`, a handler of fixed cost (it spins a few
milliseconds and returns a canned result), passed as ``Options.handler`` like any
handler. Each size runs in a fresh process, so its CPU seconds and its peak memory
(``ru_maxrss``) are its own; the sandbox check and the template gradebook are cached
before the first measured size, as a course's setup would be.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from grader.autograde.messages import Graded, GradeJob, TemplateBuilt, TemplateJob, WorkerSettings
from grader.results import Result

SIZES = (50, 500, 5000)
ASSIGNMENT, NOTEBOOK = "10.1-self-attention", "self_attention.ipynb"
POINTS = {"qkv_projections": 2.0, "QKVProjection": 2.0}
COST_S = 0.004  # CPU seconds the stand-in spends per submission, in the worker


class StandIn:
    """A grading handler of fixed cost for the host's benchmark (a worker serves it)."""

    def __init__(self, settings: WorkerSettings):
        self.settings = settings

    def grade(self, job: GradeJob) -> Graded:
        started = time.process_time()
        while time.process_time() - started < COST_S:
            pass
        result = Result(job.student, job.assignment, points=dict(POINTS), max_points=dict(POINTS),
                        score=sum(POINTS.values()), max_score=sum(POINTS.values()),
                        content_hash=job.content_hash, device="cpu", torch="stand-in")
        return Graded(result)

    def template(self, job: TemplateJob) -> TemplateBuilt:
        path = Path(job.dest) / "gradebook.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        return TemplateBuilt(str(path))


def synthetic_class(root: Path, size: int) -> Path:
    """``size`` students, each with a small valid notebook for 10.1."""
    for i in range(size):
        folder = root / f"student-{i:05d}" / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"answer = {i}")])
        nbformat.write(nb, folder / NOTEBOOK)
    return root


def peak_mb() -> float:
    """This process's peak resident memory. On Linux ``VmHWM``: ``ru_maxrss`` of a process that
    a large one started also counts the parent's memory at the fork (1 GB inside ``make bench``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def grade_class(size: int, work: Path, cache: Path, jobs: int = 2) -> dict:
    """Grade a synthetic class of ``size`` in this process; what the host spent."""
    from grader.autograde.host.options import Options
    from grader.autograde.host.run import autograde

    subs = synthetic_class(work / f"class-{size}", size)
    out = work / f"out-{size}"
    options = Options(jobs=jobs, cache=cache, progress=False, handler=f"{__name__}:StandIn")
    baseline_mb, cpu, wall = peak_mb(), cpu_s(resource.RUSAGE_SELF), time.monotonic()
    summary = autograde(subs, out, options)
    wall, cpu = time.monotonic() - wall, cpu_s(resource.RUSAGE_SELF) - cpu
    rows = (out / "grades.csv").read_text().count("\n") - 1
    results_mb = sum(p.stat().st_size for p in (out / "results").glob("*/*.json")) / 2**20
    return {"size": size, "graded": summary.graded, "rows": rows, "host_cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3), "workers_cpu_s": round(cpu_s(resource.RUSAGE_CHILDREN), 3),
            "host_cpu_ms_per_submission": round(1000 * cpu / size, 3),
            "peak_mb": round(peak_mb(), 1), "baseline_mb": round(baseline_mb, 1),
            "growth_kb_per_submission": round(1024 * (peak_mb() - baseline_mb) / size, 2),
            "results_json_kb_per_submission": round(1024 * results_mb / size, 2)}


def measure(size: int, work: Path, cache: Path, jobs: int) -> dict:
    """:func:`grade_class` in a fresh process (its own CPU clock and peak memory)."""
    code = ("import json, sys; from pathlib import Path; from bench.host_scale import grade_class; "
            f"print(json.dumps(grade_class({size}, Path({str(work)!r}), Path({str(cache)!r}), {jobs})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(Path(__file__).resolve().parent.parent), timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"grading a class of {size} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_host(sizes: tuple[int, ...] = SIZES, jobs: int = 2, work: Path | None = None, log=print) -> dict:
    """Host CPU seconds and peak memory per submission at each class size, and the ratios."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-host-") as scratch:
        work = Path(work or scratch)
        cache = work / "cache"
        log("  warming the cache (sandbox check, template)")
        measure(2, work / "warm", cache, jobs)
        by_size = {}
        for size in sizes:
            by_size[str(size)] = measure(size, work / f"n{size}", cache, jobs)
            log(f"  {size} submissions: {by_size[str(size)]['host_cpu_ms_per_submission']} ms "
                f"host CPU each, peak {by_size[str(size)]['peak_mb']} MB")
    small, large = by_size[str(sizes[0])], by_size[str(sizes[-1])]
    extra = large["size"] - small["size"]
    return {"sizes": by_size, "jobs": jobs, "stand_in_cpu_s": COST_S,
            "cpu_ratio_largest_to_smallest": round(large["host_cpu_ms_per_submission"]
                                                   / small["host_cpu_ms_per_submission"], 2),
            "target_cpu_ratio": 1.5,
            # What one more submission costs, between the smallest and the largest class: the
            # fixed start-up (imports, the worker processes) left out.
            "marginal_host_cpu_ms_per_submission": round(
                1000 * (large["host_cpu_s"] - small["host_cpu_s"]) / extra, 3),
            "marginal_kb_per_submission": round(1024 * (large["peak_mb"] - small["peak_mb"]) / extra, 2),
            "measured_with": "bench.host_scale: the real host side, workers grading with the "
                             "StandIn handler; one fresh process per size"}
