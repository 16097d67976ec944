"""How long each solution notebook takes start to finish, and its kernel's peak memory.

Each run happens in a fresh ``python -m bench.notebooks PATH`` process that starts the
kernel with nbclient, runs every cell and shuts the kernel down; the clock covers all of
that (kernel start included). Peak memory is the larger of

* the kernel's own high-water mark, ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` read by that
  process after the kernel has exited (exact, but per process), and
* the resident memory of the kernel's whole process tree, polled every 20 ms with psutil
  (catches helper processes a notebook starts, such as DataLoader workers).

Notebooks run as a learner runs them: ``COURSE_QUICK`` and ``COURSE_GRADING_DIR`` unset, so
10.6, 10.7, 10.8 and 10.9 train in full.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import ROOT
from grader.paths import SOLUTIONS, assignment_folders, section_of

#: Targets from the course's timing budget (seconds on 2 cores, MB), by section.
TARGET_SECONDS = {"10.6": 60.0, "10.7": 60.0, "10.8": 60.0, "10.9": 60.0}
DEFAULT_TARGET_SECONDS = 20.0
TARGET_PEAK_MB = 1536.0


def discover(solutions: Path = ROOT / SOLUTIONS) -> dict[str, Path]:
    """Every solution notebook by section, in section order (one notebook per assignment)."""
    return {section_of(folder.name): sorted(folder.glob("*.ipynb"))[0]
            for folder in assignment_folders(solutions)}


def learner_env(quick: bool = False) -> dict[str, str]:
    """The environment a learner's kernel gets: no grading variables; a figure backend."""
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_QUICK", "COURSE_GRADING_DIR")}
    env["MPLBACKEND"] = "Agg"
    if quick:
        env["COURSE_QUICK"] = "1"
    return env


class TreeMemoryPoller(threading.Thread):
    """Polls the resident memory (MB) of this process's descendants; keeps the peak."""

    def __init__(self, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak_mb = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._done.is_set():
            total = 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)
            self._done.wait(self.interval)

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_mb


def run_here(path: Path, timeout: int = 600) -> dict:
    """Run ``path`` in a fresh kernel started by this process; seconds, memory, errors."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent)}})
    poller = TreeMemoryPoller()
    poller.start()
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    tree_mb = poller.stop()
    kernel_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    errors = [f"cell {i}: {out.ename}: {out.evalue}"[:200] for i, cell in enumerate(nb.cells)
              if cell.cell_type == "code" for out in cell.get("outputs", [])
              if out.output_type == "error"]
    return {"seconds": seconds, "peak_rss_mb": max(kernel_mb, tree_mb),
            "kernel_maxrss_mb": kernel_mb, "tree_polled_mb": tree_mb, "errors": errors}


def run_once(path: Path, quick: bool = False, timeout: int = 600,
             extra_env: dict[str, str] | None = None) -> dict:
    """One run of ``path`` in a fresh process (so memory figures start from nothing), alone: no
    checkpoint saved by an earlier notebook (10.8 trains what it would load)."""
    alone = tempfile.mkdtemp(prefix="bench-checkpoints-")  # nothing saved by an earlier notebook
    env = {**learner_env(quick), "COURSE_CHECKPOINTS": alone,  # course.checkpoints.FOLDER_ENV (no torch here)
           **(extra_env or {})}
    result = subprocess.run([sys.executable, "-m", "bench.notebooks", str(path), str(timeout)],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                            timeout=timeout + 120)
    shutil.rmtree(alone, ignore_errors=True)
    if result.returncode != 0:
        raise RuntimeError(f"could not run {path}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def bench_notebooks(sections: list[str] | None = None, repeats: int = 3,
                    long_repeats: int = 1, quick: bool = False, log=print) -> dict:
    """``{section: {seconds, peak_rss_mb, ...}}`` for every solution notebook found.

    Short notebooks are run ``repeats`` times (median seconds, highest peak); 10.6, 10.7 and 10.8,
    whose full trainings take most of a minute, ``long_repeats`` times.
    """
    report = {}
    for section, path in discover().items():
        if sections is not None and section not in sections:
            continue
        target = TARGET_SECONDS.get(section, DEFAULT_TARGET_SECONDS)
        n = long_repeats if target > DEFAULT_TARGET_SECONDS else repeats
        runs = [run_once(path, quick=quick) for _ in range(n)]
        seconds = [r["seconds"] for r in runs]
        entry = {
            "notebook": str(path.relative_to(ROOT)),
            "seconds": round(statistics.median(seconds), 2),
            "seconds_runs": [round(s, 2) for s in seconds],
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
            "kernel_maxrss_mb": round(max(r["kernel_maxrss_mb"] for r in runs), 1),
            "tree_polled_mb": round(max(r["tree_polled_mb"] for r in runs), 1),
            "errors": runs[-1]["errors"],
            "quick": quick,
            "target_seconds": target,
            "target_peak_rss_mb": TARGET_PEAK_MB,
        }
        entry["meets_targets"] = (not entry["errors"] and entry["seconds"] < target
                                  and entry["peak_rss_mb"] < TARGET_PEAK_MB)
        report[section] = entry
        log(f"  notebook {section}: {entry['seconds']:.1f} s, {entry['peak_rss_mb']:.0f} MB"
            + (f", {len(entry['errors'])} error(s)" if entry["errors"] else ""))
    return report


if __name__ == "__main__":  # python -m bench.notebooks PATH [TIMEOUT]: one run, JSON on stdout
    timeout_arg = int(sys.argv[2]) if len(sys.argv) > 2 else 600
    print(json.dumps(run_here(Path(sys.argv[1]).resolve(), timeout_arg)))
