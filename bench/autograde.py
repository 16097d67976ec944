"""Grading a class: stock serial ``nbgrader autograde`` against ours, on the same submissions.

The side-by-side measurement is :func:`benchmark_against_nbgrader` (stock serial ``nbgrader
autograde`` per assignment in a scratch course, ``generate_assignment`` before the clock
starts; then ``autograde(..., Options(jobs=...))``, the function behind ``python -m grader
autograde``). The class is :func:`bench.samples.benchmark_set`: for each assignment, a
correct notebook and three broken ones (a wrong answer, a syntax error, an exception).

On top of that, this module measures the overhead of grading over plain execution: the
correct submissions (the ones that run every cell of the notebook in full) run again with
nbclient, just as they were handed in (``COURSE_QUICK=1``, the short version grading runs
too), as many at once as the grader's jobs, with the same threads per kernel.
``overhead_ratio`` is the grader's time for those notebooks (restoring the hidden tests,
running them, verifying the records, writing feedback) over their plain runs' time. With at
least as many correct submissions as jobs (the default: two assignments, two jobs) the plain
runs share the CPUs as the graded ones did.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import ROOT, cpu_seconds
from bench.notebooks import run_once
from bench.samples import benchmark_set
from grader.autograde import report
from grader.autograde.cache import warm_cache
from grader.autograde.options import Options, available_cpus
from grader.autograde.run import autograde
from grader.paths import NBGRADER_CONFIG, with_python_tools

TARGET_SPEEDUP = 1.6
KEYS = ("serial_nbgrader_s", "parallel_s", "jobs", "speedup", "overhead_ratio")


def unavailable(reason: str, jobs: int) -> dict:
    """Null figures, and why."""
    return {**{key: None for key in KEYS}, "jobs": jobs, "reason": reason,
            "target_speedup": TARGET_SPEEDUP}


def gradable_assignments(root: Path = ROOT) -> list[str]:
    """Assignments with an instructor and a learner notebook (samples need both)."""
    return sorted(p.name for p in (root / "solutions").iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb"))
                  and any((root / "notebooks" / p.name).glob("*.ipynb")))


def submission_key(path: Path) -> tuple[str, str]:
    """``.../<student>/<assignment>/<notebook>.ipynb`` -> (student, assignment)."""
    return path.parent.parent.name, path.parent.name


def stock_nbgrader(submissions: Path, assignments: list[str], timeout: int,
                   solutions: Path = ROOT / "solutions") -> tuple[float, float, dict]:
    """Wall and CPU seconds of stock serial ``nbgrader autograde`` on ``submissions``; scores.

    ``generate_assignment`` (setup, not grading) runs before the clock starts. The kernels
    get ``COURSE_QUICK=1`` as ours do, so both grade the same short version of a notebook.
    """
    from grader.autograde.submissions import find_root

    with tempfile.TemporaryDirectory(prefix="cg-stock-") as scratch:
        course = Path(scratch)
        shutil.copy(NBGRADER_CONFIG, course / "nbgrader_config.py")
        for name in assignments:
            shutil.copytree(solutions / name, course / "solutions" / name)
        shutil.copytree(find_root(submissions, set(assignments)), course / "submitted")
        env = with_python_tools({**os.environ, "COURSE_QUICK": "1"})
        env.pop("COURSE_GRADING_DIR", None)
        base = [sys.executable, "-m", "nbgrader"]
        for name in assignments:
            subprocess.run(base + ["generate_assignment", name, "--force", "--log-level=ERROR"],
                           cwd=course, env=env, check=True, capture_output=True)
        started, cpu = time.monotonic(), cpu_seconds()
        for name in assignments:
            subprocess.run(base + ["autograde", name, "--force", "--log-level=ERROR",
                                   f"--Execute.timeout={timeout}"],
                           cwd=course, env=env, capture_output=True)
        elapsed, cpu = time.monotonic() - started, cpu_seconds() - cpu
        from nbgrader.api import Gradebook

        scores = {}
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for name in assignments:
                for submission in gb.assignment_submissions(name):
                    scores[(submission.student_id, name)] = submission.score
    return elapsed, cpu, scores


def benchmark_against_nbgrader(submissions: Path, jobs: int = 2, timeout: int = 60,
                               out: Path | None = None) -> dict:
    """Time stock serial ``nbgrader autograde`` and ``autograde --jobs`` on the same set.

    Setup is left out of both clocks: ``generate_assignment`` for nbgrader, the template
    gradebooks and the sandbox check (:func:`warm_cache`) for ours. Returns the keys the
    benchmark report uses (``autograde.serial_nbgrader_s``, ``autograde.parallel_s``,
    ``autograde.jobs``, ``autograde.speedup``), the CPU seconds of both, the number of
    notebooks and CPUs, and the submissions whose total differs between the two (expected
    only where ours is stricter or more forgiving by design: integrity flags, stderr
    warnings, dead kernels).
    """
    submissions = Path(submissions)
    notebooks = sorted(submissions.glob("*/*/*.ipynb"))
    assignments = sorted({p.parent.name for p in notebooks})
    serial, serial_cpu, stock_scores = stock_nbgrader(submissions, assignments, timeout)
    with tempfile.TemporaryDirectory(prefix="cg-bench-") as scratch:
        target = Path(out) if out else Path(scratch) / "out"
        if target.exists():
            shutil.rmtree(target)
        options = Options(jobs=jobs, timeout=timeout, progress=False,
                          cache=Path(scratch) / "cache")
        warm_cache(assignments, options, target)
        started, cpu = time.monotonic(), cpu_seconds()
        autograde(submissions, target, options)
        parallel, parallel_cpu = time.monotonic() - started, cpu_seconds() - cpu
        ours = report.load_results(target)
    differ = sorted(f"{s}/{a}: nbgrader {stock_scores.get((s, a))}, ours {r.score} ({r.status})"
                    for (s, a), r in ours.items()
                    if stock_scores.get((s, a)) is not None
                    and abs(stock_scores[(s, a)] - r.score) > 1e-9)
    return {"autograde.serial_nbgrader_s": round(serial, 2),
            "autograde.parallel_s": round(parallel, 2),
            "autograde.jobs": jobs,
            "autograde.speedup": round(serial / parallel, 2),
            "autograde.serial_nbgrader_cpu_s": round(serial_cpu, 2),
            "autograde.parallel_cpu_s": round(parallel_cpu, 2),
            "autograde.notebooks": len(notebooks),
            "autograde.cpus": available_cpus(),
            "autograde.score_differences": differ}
def plain_seconds(notebooks: list[Path], jobs: int, threads: int) -> list[float]:
    """Each notebook run plainly by nbclient, ``jobs`` at a time, ``threads`` per kernel."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

    def one(path: Path) -> float:
        return run_once(path, quick=True, extra_env=env)["seconds"]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, notebooks))


def bench_autograde(assignments: list[str] | None = None, copies: int = 1, jobs: int = 2,
                    timeout: int = 60, log=print) -> dict:
    """The ``autograde.*`` figures: serial stock nbgrader, ours with ``jobs``, overhead."""
    names = assignments or gradable_assignments()[-2:]
    if not names:
        return unavailable("no assignment has both solutions/ and notebooks/ yet", jobs)
    with tempfile.TemporaryDirectory(prefix="bench-autograde-") as scratch:
        submitted = benchmark_set(Path(scratch) / "submitted", names, copies=copies)
        notebooks = sorted(submitted.glob("*/*/*.ipynb"))
        log(f"  autograde: {len(notebooks)} submissions of {', '.join(names)}")
        out = Path(scratch) / "out"
        side_by_side = benchmark_against_nbgrader(submitted, jobs=jobs, timeout=timeout, out=out)
        results = report.load_results(out)
        threads = max(1, available_cpus() // jobs)
        full_runs = [p for p in notebooks if submission_key(p)[0].startswith("correct")]
        plain = dict(zip(map(submission_key, full_runs), plain_seconds(full_runs, jobs, threads)))
    figures = {key.split(".", 1)[1]: value for key, value in side_by_side.items()}
    graded = [r.elapsed_s for r in results.values() if r.elapsed_s]
    statuses = sorted(f"{s}/{a}: {r.status} {r.score:g}/{r.max_score:g}"
                      + (f" ({r.reason[:160]})" if r.status == "error" else "")
                      for (s, a), r in results.items())
    compared = [results[key].elapsed_s for key in plain if key in results]
    overhead = sum(compared) / sum(plain.values()) if compared and len(compared) == len(plain) else None
    failed = [r for r in results.values() if r.status == "error" and r.retry]
    if failed:  # the grader's own failures: its time is not the time of grading
        figures["reason"] = (f"our grader failed on {len(failed)} of {len(results)} submissions "
                             f"(e.g. {failed[0].reason[:200]}); speedup and overhead not reported")
        figures["parallel_s_measured"] = figures.pop("parallel_s")
        figures["parallel_s"] = figures["speedup"] = overhead = None
    phases: dict[str, list[float]] = {}
    for r in results.values():  # the grader's own breakdown, where it records one
        for phase, seconds in (getattr(r, "timings", None) or {}).items():
            phases.setdefault(phase, []).append(seconds)
    figures.update({
        "grading_phases_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()},
        "assignments": names,
        "submissions": statuses,
        "threads_per_kernel": threads,
        "grading_s_per_notebook": round(statistics.median(graded), 2) if graded else None,
        "overhead_compared": {f"{s}/{a}": {"grading_s": results[(s, a)].elapsed_s if (s, a) in results
                                            else None, "plain_s": round(t, 2)}
                              for (s, a), t in plain.items()},
        "plain_s_per_notebook": round(statistics.median(plain.values()), 2) if plain else None,
        "overhead_ratio": round(overhead, 2) if overhead else None,
        "target_speedup": TARGET_SPEEDUP,
        "measured_with": "bench.autograde.benchmark_against_nbgrader (in-process autograde(), "
                         "the function behind python -m grader autograde)",
    })
    log(f"  autograde: nbgrader serial {figures['serial_nbgrader_s']} s, ours --jobs {jobs} "
        f"{figures['parallel_s']} s, speedup {figures['speedup']}, overhead {figures['overhead_ratio']}")
    return figures
