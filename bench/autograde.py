"""Grading a class: stock serial ``nbgrader autograde`` against ours, on the same submissions.

The side-by-side measurement is :func:`benchmark_against_nbgrader` (stock serial ``nbgrader
autograde`` per assignment in a scratch course, ``generate_assignment`` before the clock
starts; then ``autograde(..., Options(jobs=...))``, the function behind ``python -m grader
autograde``). The class is :func:`samples.benchmark_set`: for each assignment, a
correct notebook and three broken ones (a wrong answer, a syntax error, an exception).

On top of that, this module measures the overhead of grading over plain execution: the
correct submissions (the ones that run every cell of the notebook in full) run again with
nbclient, just as they were handed in (``COURSE_QUICK=1``, the short version grading runs
too), as many at once as the grader's jobs, with the same threads per kernel.
``overhead_ratio`` is the grader's time for those notebooks (restoring the hidden tests,
running them, verifying the records, writing feedback) over their plain runs' time. With at
least as many correct submissions as jobs (the default: two assignments, two jobs) the plain
runs share the CPUs as the graded ones did.

The target is the machine's own: :func:`machine_ceiling` runs the class's notebooks plainly
with nbclient in ``jobs`` streams (each stream all of them, in order), one stream after
another and then all at once; its speedup is what ``jobs`` parallel kernels can gain on this
machine now, and ours should reach ``TARGET_SHARE`` of it.
"""

from __future__ import annotations

import json
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
from grader import results as report
from grader.autograde.host.cache import warm_cache
from grader.autograde.host.options import Options, available_cpus
from grader.autograde.host.run import autograde
from grader.paths import NBGRADER_CONFIG, with_python_tools
from samples import benchmark_set

#: Our speedup over stock serial nbgrader, as a share of the machine's parallel ceiling.
TARGET_SHARE = 0.95
KEYS = ("serial_nbgrader_s", "parallel_s", "jobs", "speedup", "overhead_ratio", "ceiling",
        "share_of_ceiling", "meets_target")


def unavailable(reason: str, jobs: int) -> dict:
    """Null figures, and why."""
    return {**{key: None for key in KEYS}, "jobs": jobs, "reason": reason,
            "target_share": TARGET_SHARE}


def gradable_assignments(root: Path = ROOT) -> list[str]:
    """Assignments with an instructor and a learner notebook (samples need both)."""
    return sorted(p.name for p in (root / "solutions").iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb"))
                  and any((root / "notebooks" / p.name).glob("*.ipynb")))


def submission_key(path: Path) -> tuple[str, str]:
    """``.../<student>/<assignment>/<notebook>.ipynb`` -> (student, assignment)."""
    return path.parent.parent.name, path.parent.name


#: Runs ``nbgrader ARGS``, then writes its own CPU seconds and its kernels' (reaped children)
#: to the file named by the first argument.
STOCK_RUNNER = """
import json, resource, runpy, sys
report = sys.argv.pop(1)
sys.argv[0] = "nbgrader"
try:
    runpy.run_module("nbgrader", run_name="__main__")
finally:
    own, kids = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    with open(report, "w") as out:
        json.dump({"nbgrader": own.ru_utime + own.ru_stime, "kernels": kids.ru_utime + kids.ru_stime}, out)
"""


def stock_nbgrader(submissions: Path, assignments: list[str], timeout: int,
                   solutions: Path = ROOT / "solutions") -> tuple[float, dict[str, float], dict]:
    """Stock serial ``nbgrader autograde`` on ``submissions``: wall seconds, CPU seconds by
    phase (nbgrader's own process, its kernels), scores.

    ``generate_assignment`` (setup, not grading) runs before the clock starts. The kernels
    get ``COURSE_QUICK=1`` as ours do, so both grade the same short version of a notebook.
    """
    from grader.autograde.host.submissions import find_root

    with tempfile.TemporaryDirectory(prefix="cg-stock-") as scratch:
        course = Path(scratch)
        shutil.copy(NBGRADER_CONFIG, course / "nbgrader_config.py")
        for name in assignments:
            shutil.copytree(solutions / name, course / "solutions" / name)
        shutil.copytree(find_root(submissions, set(assignments)), course / "submitted")
        env = with_python_tools({**os.environ, "COURSE_QUICK": "1"})
        env.pop("COURSE_GRADING_DIR", None)
        for name in assignments:
            subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", name, "--force",
                            "--log-level=ERROR"], cwd=course, env=env, check=True, capture_output=True)
        cpu = {"nbgrader": 0.0, "kernels": 0.0}
        started = time.monotonic()
        for name in assignments:
            usage = course / f"usage-{name}.json"
            subprocess.run([sys.executable, "-c", STOCK_RUNNER, str(usage), "autograde", name,
                            "--force", "--log-level=ERROR", f"--Execute.timeout={timeout}"],
                           cwd=course, env=env, capture_output=True)
            for phase, seconds in json.loads(usage.read_text()).items():
                cpu[phase] += seconds
        elapsed = time.monotonic() - started
        from nbgrader.api import Gradebook

        scores = {}
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for name in assignments:
                for submission in gb.assignment_submissions(name):
                    scores[(submission.student_id, name)] = submission.score
    return elapsed, cpu, scores


def ours(submissions: Path, out: Path, cache: Path, jobs: int, timeout: int,
         **options) -> tuple[float, dict[str, float], dict]:
    """``autograde(submissions, out, Options(jobs=...))`` after its setup (:func:`warm_cache`):
    wall seconds, CPU seconds by grading phase (summed over the notebooks; ``other`` is the
    rest: the workers' start-up, the run's own process), results."""
    if out.exists():
        shutil.rmtree(out)
    opts = Options(jobs=jobs, timeout=timeout, progress=False, cache=cache, **options)
    assignments = sorted({p.parent.name for p in submissions.glob("*/*/*.ipynb")})
    warm_cache(assignments, opts, out)
    started, cpu = time.monotonic(), cpu_seconds()
    autograde(submissions, out, opts)
    elapsed, total = time.monotonic() - started, cpu_seconds() - cpu
    results = report.load_results(out)
    phases: dict[str, float] = {}
    for result in results.values():
        for name, seconds in result.timings.items():
            if name.endswith("_cpu"):
                phases[name[:-4]] = phases.get(name[:-4], 0.0) + seconds
    phases["other"] = total - sum(phases.values())
    return elapsed, {k: round(v, 2) for k, v in phases.items()}, results


def benchmark_against_nbgrader(submissions: Path, jobs: int = 2, timeout: int = 60,
                               out: Path | None = None) -> dict:
    """Stock serial ``nbgrader autograde``, then ours with ``jobs`` and with one job, on the
    same submissions, one after the other in this process.

    Setup is left out of every clock: ``generate_assignment`` for nbgrader, the template
    gradebooks and the sandbox check (:func:`warm_cache`) for ours. Returns the keys the
    benchmark report uses (``autograde.serial_nbgrader_s``, ``autograde.parallel_s``,
    ``autograde.serial_s``, ``autograde.jobs``, ``autograde.speedup``), CPU seconds by phase
    of each, the number of notebooks and CPUs, and the submissions whose total differs
    between stock nbgrader and ours (expected only where ours is stricter or more forgiving
    by design: integrity flags, stderr warnings, dead kernels).
    """
    submissions = Path(submissions)
    notebooks = sorted(submissions.glob("*/*/*.ipynb"))
    assignments = sorted({p.parent.name for p in notebooks})
    stock_s, stock_cpu, stock_scores = stock_nbgrader(submissions, assignments, timeout)
    with tempfile.TemporaryDirectory(prefix="cg-bench-") as scratch:
        cache = Path(scratch) / "cache"
        target = Path(out) if out else Path(scratch) / "out"
        parallel_s, parallel_cpu, results = ours(submissions, target, cache, jobs, timeout)
        serial_s, serial_cpu, _ = ours(submissions, Path(scratch) / "serial", cache, 1, timeout)
    differ = sorted(f"{s}/{a}: nbgrader {stock_scores.get((s, a))}, ours {r.score} ({r.status})"
                    for (s, a), r in results.items()
                    if stock_scores.get((s, a)) is not None
                    and abs(stock_scores[(s, a)] - r.score) > 1e-9)
    return {"autograde.serial_nbgrader_s": round(stock_s, 2),
            "autograde.parallel_s": round(parallel_s, 2),
            "autograde.serial_s": round(serial_s, 2),
            "autograde.jobs": jobs,
            "autograde.speedup": round(stock_s / parallel_s, 2),
            "autograde.serial_speedup": round(stock_s / serial_s, 2),
            "autograde.serial_nbgrader_cpu_s": round(sum(stock_cpu.values()), 2),
            "autograde.parallel_cpu_s": round(sum(parallel_cpu.values()), 2),
            "autograde.serial_cpu_s": round(sum(serial_cpu.values()), 2),
            "autograde.cpu_by_phase": {
                "stock nbgrader, serial": {k: round(v, 2) for k, v in stock_cpu.items()},
                f"ours, --jobs {jobs}": parallel_cpu, "ours, --jobs 1": serial_cpu},
            "autograde.notebooks": len(notebooks),
            "autograde.cpus": available_cpus(),
            "autograde.score_differences": differ}


def sandbox_cost(submissions: Path, timeout: int = 60) -> dict:
    """Seconds (wall, CPU) per notebook that the bubblewrap sandbox adds: the same notebooks
    graded one at a time with and without it."""
    with tempfile.TemporaryDirectory(prefix="cg-sandbox-") as scratch:
        cache, n = Path(scratch) / "cache", len(list(submissions.glob("*/*/*.ipynb")))
        runs = {}
        for files in (True, False):
            runs[files] = ours(submissions, Path(scratch) / f"out-{files}", cache, 1, timeout,
                               isolate_files=files)
    (with_s, with_cpu, _), (without_s, without_cpu, _) = runs[True], runs[False]
    return {"notebooks": n, "with_s": round(with_s, 2), "without_s": round(without_s, 2),
            "wall_s_per_notebook": round((with_s - without_s) / n, 2),
            "cpu_s_per_notebook": round((sum(with_cpu.values()) - sum(without_cpu.values())) / n, 2),
            "files": Options().sandbox()[1]["files"]}


def plain_seconds(notebooks: list[Path], jobs: int, threads: int) -> list[float]:
    """Each notebook run plainly by nbclient, ``jobs`` at a time, ``threads`` per kernel."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

    def one(path: Path) -> float:
        return run_once(path, quick=True, extra_env=env)["seconds"]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, notebooks))


def machine_ceiling(notebooks: list[Path], streams: int, threads: int) -> dict:
    """What ``streams`` parallel kernels gain here: ``streams`` plain nbclient runs of all
    ``notebooks`` (each in order), one after another, then at once; wall and CPU seconds."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

    def stream(_: int) -> None:
        for path in notebooks:
            run_once(path, quick=True, extra_env=env)

    figures = {}
    for mode, workers in (("serial", 1), ("parallel", streams)):
        started, cpu = time.monotonic(), cpu_seconds()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(stream, range(streams)))
        figures[f"{mode}_s"] = round(time.monotonic() - started, 2)
        figures[f"{mode}_cpu_s"] = round(cpu_seconds() - cpu, 2)
    return {**figures, "streams": streams, "notebooks": len(notebooks), "threads_per_kernel": threads,
            "speedup": round(figures["serial_s"] / figures["parallel_s"], 2)}


def against_ceiling(speedup: float | None, ceiling: dict) -> dict:
    """Our speedup as a share of the machine's ceiling, and whether it meets the target."""
    if speedup is None:
        return {"share_of_ceiling": None, "meets_target": None}
    share = round(speedup / ceiling["speedup"], 3)
    return {"share_of_ceiling": share, "meets_target": share >= TARGET_SHARE}


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
        log(f"  autograde: the machine's ceiling, {jobs} plain runs of the {len(notebooks)} notebooks "
            "one after another, then at once")
        ceiling = machine_ceiling(notebooks, jobs, threads)
        correct = Path(scratch) / "correct"
        for path in notebooks:
            if submission_key(path)[0].startswith("correct"):
                shutil.copytree(path.parent, correct / path.parent.parent.name / path.parent.name)
        log(f"  autograde: the sandbox's cost, on {len(list(correct.glob('*/*/*.ipynb')))} correct "
            "notebooks graded with and without it")
        sandbox = sandbox_cost(correct, timeout=timeout)
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
        "sandbox_cost": sandbox,
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
        "ceiling": ceiling,
        **against_ceiling(figures["speedup"], ceiling),
        "target_share": TARGET_SHARE,
        "measured_with": "bench.autograde.benchmark_against_nbgrader (in-process autograde(), "
                         "the function behind python -m grader autograde)",
    })
    log(f"  autograde: nbgrader serial {figures['serial_nbgrader_s']} s, ours --jobs {jobs} "
        f"{figures['parallel_s']} s, speedup {figures['speedup']} of the machine's {ceiling['speedup']}, "
        f"overhead {figures['overhead_ratio']}")
    return figures
