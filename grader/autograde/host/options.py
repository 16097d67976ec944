"""The settings of one ``autograde`` run, and what it reports when done."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from grader.autograde.host.sandbox import readable_paths, require_isolation, resolve_files, resolve_user
from grader.autograde.messages import NBGRADER_HANDLER, GradingOptions
from grader.autograde.sandbox.config import KERNEL_NAME, Limits, SandboxConfig
from grader.paths import solutions_dir
from grader.results import ERROR, FLAGGED, OK


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass
class Options:
    """Settings of one ``autograde`` run (the command line's options).

    The host reads them where it decides; what a worker needs crosses the pipe as the typed
    parts :meth:`grading` and :meth:`sandbox` (:mod:`grader.autograde.messages`).
    """

    jobs: int = field(default_factory=available_cpus)
    timeout: int = 60  # seconds per cell
    submission_timeout: int = 0  # seconds per notebook, whole; 0: derived from timeout
    shard: tuple[int, int] = (1, 1)
    force: bool = False
    deadlines: dict[str, str] = field(default_factory=dict)  # assignment or "*" -> ISO time
    assignments: list[str] | None = None
    submitted_at: str | None = None  # CSV of an LMS zip's submission times (host.submitted_at)
    students: list[str] | None = None  # regrade only these (the others' results are kept)
    memory_mb: int = 4096
    cpu_seconds: int = 0  # 0: the submission timeout
    file_mb: int = 1024
    processes: int = 2048
    sandbox_user: str | None = "nobody"
    isolate_network: bool = True
    isolate_files: bool = True  # bubblewrap, where it runs (grader.autograde.host.sandbox)
    require_sandbox: bool = False  # refuse to grade when bubblewrap cannot isolate kernels
    max_output_chars: int = 1_000_000
    progress: bool = True
    solutions: Path | None = None  # default: the course's solutions/ (grader.paths)
    cache: Path | None = None  # template gradebooks and the sandbox check; default OUT/.cache
    handler: str = NBGRADER_HANDLER  # what the workers grade with (module:attribute)

    def source(self) -> Path:
        """The instructor notebooks the hidden tests are restored from."""
        return Path(self.solutions) if self.solutions else solutions_dir()

    def cache_dir(self, out: Path) -> Path:
        return Path(self.cache) if self.cache else out / ".cache"

    def whole_notebook_s(self) -> int:
        return self.submission_timeout or 6 * self.timeout + 180

    def limits(self) -> Limits:
        return Limits(cpu_seconds=self.cpu_seconds or self.whole_notebook_s(),
                      memory_mb=self.memory_mb, file_mb=self.file_mb, processes=self.processes)

    def sandbox(self, hidden: list[Path] = ()) -> tuple[SandboxConfig, dict[str, str]]:
        """The kernels' sandbox as this platform allows it, and what it could not apply.

        ``hidden``: folders no kernel may see (OUT, the submissions, the scratch folder).
        """
        config = SandboxConfig(self.limits(), self.sandbox_user, self.isolate_network,
                               self.isolate_files, readable=tuple(readable_paths()),
                               hidden=tuple(str(Path(p).resolve()) for p in hidden))
        config, user = resolve_user(config)
        config, files = resolve_files(config)
        if self.require_sandbox:
            require_isolation(config, files)
        return config, {"user": user, "files": files}

    def grading(self) -> GradingOptions:
        """How nbgrader runs each notebook, as the workers get it."""
        return GradingOptions(timeout=self.timeout, kernel_name=KERNEL_NAME,
                              max_output_chars=self.max_output_chars)

    def deadline(self, assignment: str) -> str | None:
        return self.deadlines.get(assignment) or self.deadlines.get("*")

    def grading_key(self) -> str:
        """The options that change grades (part of every content hash)."""
        return json.dumps({"timeout": self.timeout, "memory": self.memory_mb,
                           "output": self.max_output_chars}, sort_keys=True)


@dataclass
class Summary:
    """What a run did, for the closing lines and for scripts."""

    graded: int = 0
    skipped: int = 0
    damaged: int = 0  # earlier results found damaged or missing their student: regraded
    counts: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0
    sandbox: dict = field(default_factory=dict)
    out: str = ""
    unplaced: dict[str, str] = field(default_factory=dict)  # a zip's files that are no one's: why
    not_graded: Path | None = None  # OUT/not-graded.csv, where they are listed
    warnings: list[str] = field(default_factory=list)  # what the instructor must look at
    carried: int = 0  # earlier rows this batch does not hold, kept as they were
    absent: list[str] = field(default_factory=list)  # of those, rows whose student a new batch lacked

    def text(self) -> str:
        c = self.counts
        lines = [f"Graded {self.graded} submission(s) in {self.elapsed_s:.1f} s"
                 + (f" ({self.skipped} unchanged, skipped)" if self.skipped else "")
                 + (f" ({self.damaged} damaged earlier results regraded)" if self.damaged else "")
                 + f": {c[OK]} ok, {c[ERROR]} errors, {c[FLAGGED]} flagged.",
                 f"Grades: {Path(self.out) / 'grades.csv'}; feedback: {Path(self.out) / 'feedback'}"]
        if self.sandbox:
            lines.append("Sandbox: " + "; ".join(f"{k} {v}" for k, v in self.sandbox.items()))
        lines += self.warnings
        if self.carried > len(self.absent):
            lines.append(f"Kept as they were: {self.carried - len(self.absent)} earlier row(s) of "
                         "students or assignments this batch does not hold.")
        if self.absent:
            lines.append(f"NOT IN THIS BATCH, earlier rows kept (in_batch: no) ({len(self.absent)}): "
                         "check whether they withdrew or the download missed them")
            lines += [f"  {k}" for k in self.absent]
        if self.unplaced:
            lines.append(f"NOT GRADED, files of the zip that belong to no submission ({len(self.unplaced)}; "
                         f"listed in {self.not_graded}):")
            lines += [f"  {name}: {why}" for name, why in sorted(self.unplaced.items())]
        return "\n".join(lines)
