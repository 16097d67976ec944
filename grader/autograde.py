"""Grade a whole class with nbgrader: ``python -m grader autograde SUBMISSIONS --out OUT``.

How a run goes (docs/grading.md has the instructor's version):

1. Find the submissions (:mod:`grader.submissions`); anything that cannot be graded
   (missing, empty, misnamed, invalid JSON) becomes an error row at once.
2. Take this run's shard (``--shard K/N``) and skip what an earlier run in the same OUT
   already graded from identical content (``--force`` regrades).
3. Check the sandbox (:mod:`grader.sandbox`): torch must import under the limits.
4. Start ``--jobs`` workers (:mod:`grader.worker`); each grades one submission at a time
   in a scratch nbgrader course with its own gradebook, verifies the integrity records,
   and writes the feedback. Each result is saved atomically as it completes, and
   ``grades.csv`` is rewritten after every result.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader import report
from grader.report import ERROR, FLAGGED, OK, Result
from grader.sandbox import (
    KERNEL_NAME,
    PASSTHROUGH_ENV,
    Limits,
    SandboxConfig,
    kernel_env,
    probe,
    resolve_user,
    write_kernelspec,
)
from grader.submissions import (
    Assignment,
    Submission,
    content_hash,
    course_assignments,
    discover,
    extract_zip,
    shard,
    tree_digest,
)

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
GRADER_DIR = Path(__file__).resolve().parent
WORKER_START_S = 300
#: ``python -I -m grader.worker``, but first keeping out a slow import that nbformat never
#: needs (see grader.submissions).
WORKER_COMMAND = ["-I", "-c", "import sys; sys.modules.setdefault('rfc3987_syntax', None); "
                  "from grader.worker import main; sys.exit(main(sys.argv[1:]))"]


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


@dataclass
class Options:
    """Settings of one ``autograde`` run (the command line's options)."""

    jobs: int = field(default_factory=available_cpus)
    timeout: int = 60  # seconds per cell
    submission_timeout: int = 0  # seconds per notebook, whole; 0: derived from timeout
    shard: tuple[int, int] = (1, 1)
    force: bool = False
    deadlines: dict[str, str] = field(default_factory=dict)  # assignment or "*" -> ISO time
    assignments: list[str] | None = None
    memory_mb: int = 4096
    cpu_seconds: int = 0  # 0: the submission timeout
    file_mb: int = 1024
    processes: int = 2048
    sandbox_user: str | None = "nobody"
    isolate_network: bool = True
    max_output_chars: int = 1_000_000
    progress: bool = True
    solutions: Path = SOLUTIONS
    cache: Path | None = None  # template gradebooks and the sandbox check; default OUT/.cache

    def cache_dir(self, out: Path) -> Path:
        return Path(self.cache) if self.cache else out / ".cache"

    def whole_notebook_s(self) -> int:
        return self.submission_timeout or 6 * self.timeout + 180

    def limits(self) -> Limits:
        return Limits(cpu_seconds=self.cpu_seconds or self.whole_notebook_s(),
                      memory_mb=self.memory_mb, file_mb=self.file_mb, processes=self.processes)

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
    counts: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0
    sandbox: dict = field(default_factory=dict)
    out: str = ""

    def text(self) -> str:
        c = self.counts
        lines = [f"Graded {self.graded} submission(s) in {self.elapsed_s:.1f} s"
                 + (f" ({self.skipped} unchanged, skipped)" if self.skipped else "")
                 + f": {c[OK]} ok, {c[ERROR]} errors, {c[FLAGGED]} flagged.",
                 f"Grades: {Path(self.out) / 'grades.csv'}; feedback: {Path(self.out) / 'feedback'}"]
        if self.sandbox:
            lines.append("Sandbox: " + "; ".join(f"{k} {v}" for k, v in self.sandbox.items()))
        return "\n".join(lines)


# ---------------------------------------------------------------- workers


class WorkerFailed(Exception):
    """The worker process died or overran; the message says which."""


class Worker:
    """One grading worker, seen through its pair of pipes (see :func:`spawn_workers`)."""

    def __init__(self, jobs: int, answers: int, log: Path,
                 process: subprocess.Popen | None = None):
        self.jobs, self.answers, self.log = jobs, answers, log
        self.process = process  # the Popen of the process that forked the workers, on slot 0
        self.pid = 0
        self.buffer = b""

    def start(self, settings: dict) -> Worker:
        """Wait until the worker has imported nbgrader and torch, then send the settings."""
        self.pid = self._read(WORKER_START_S, "starting the grading worker")["pid"]
        self._send(settings)
        return self

    def _send(self, payload: dict) -> None:
        try:
            os.write(self.jobs, (json.dumps(payload) + "\n").encode())
        except OSError:
            raise WorkerFailed(f"the grading worker died; see {self.where()}") from None

    def _read(self, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerFailed(f"{what} took more than {timeout:.0f} s")
            ready, _, _ = select.select([self.answers], [], [], remaining)
            if ready:
                chunk = os.read(self.answers, 1 << 20)
                if not chunk:
                    raise WorkerFailed(f"the grading worker died; see {self.where()}")
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def where(self) -> str:
        """The log, as a path relative to OUT (reasons must not depend on where OUT is)."""
        return f"{self.log.parent.name}/{self.log.name}"

    def call(self, job: dict, timeout: float) -> dict:
        self._send(job)
        return self._read(timeout, "grading this submission")

    def kill(self) -> None:
        """Stop the worker now (its kernels die with it: PR_SET_PDEATHSIG)."""
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.close()

    def close(self) -> None:
        """No more jobs: the worker finishes and exits."""
        for fd in (self.jobs, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        self.jobs = self.answers = -1


def spawn_workers(count: int, env: dict[str, str], cwd: Path, log: Path) -> list[Worker]:
    """Start ``count`` workers as one process that imports once and forks the others.

    Each worker gets a pipe for jobs and one for answers (``--slots``). Call
    :meth:`Worker.start` on each before use.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    pipes = [(os.pipe(), os.pipe()) for _ in range(count)]  # ((jobs r, w), (answers r, w))
    theirs = [(jobs[0], answers[1]) for jobs, answers in pipes]
    with open(log, "ab") as log_file:
        process = subprocess.Popen(
            [sys.executable, *WORKER_COMMAND, "--slots", ";".join(f"{r},{w}" for r, w in theirs)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env, cwd=cwd,
            start_new_session=True, pass_fds=[fd for pair in theirs for fd in pair])
    for pair in theirs:
        for fd in pair:
            os.close(fd)
    return [Worker(jobs[1], answers[0], log, process if i == 0 else None)
            for i, (jobs, answers) in enumerate(pipes)]


def worker_env(work: Path) -> dict[str, str]:
    """The worker's own environment: as clean as the kernels'."""
    home = work / "worker-home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
           "HOME": str(home), "TMPDIR": str(home / "tmp"), "LANG": "C.UTF-8",
           "LC_ALL": "C.UTF-8"}
    env.update({k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ})
    return env


# ---------------------------------------------------------------- the run


class Run:
    """State of one autograde run: results so far, progress, the CSV."""

    def __init__(self, out: Path, options: Options, keys: list[tuple[str, str]],
                 exercises: list[str], results: dict[tuple[str, str], Result]):
        self.out, self.options, self.keys, self.exercises = out, options, keys, exercises
        self.results = results
        self.lock = threading.Lock()
        self.summary = Summary(out=str(out))
        self.bar = None

    def record(self, result: Result) -> None:
        """Save one result atomically, rewrite grades.csv, advance the progress bar."""
        with self.lock:
            report.save_result(self.out, result)
            self.results[result.key] = result
            self.write_csv()
            self.summary.graded += 1
            self.summary.counts[result.status] += 1
            if self.bar is not None:
                self.bar.update(1)
                self.bar.set_postfix(ok=self.summary.counts[OK],
                                     errors=self.summary.counts[ERROR],
                                     flagged=self.summary.counts[FLAGGED], refresh=False)

    def write_csv(self) -> None:
        mine = [self.results[k] for k in self.keys if k in self.results]
        report.write_grades(self.out, mine, self.exercises)


def problem_result(sub: Submission, digest: str) -> Result:
    """The error row of a submission that cannot be graded."""
    return Result(sub.student, sub.assignment, status=ERROR, reason=sub.problem,
                  notes=[sub.problem, *sub.notes], content_hash=digest)


def job_for(sub: Submission, assignment: Assignment, template: Path, digest: str) -> dict:
    return {"type": "grade", "student": sub.student, "assignment": sub.assignment,
            "folder": str(sub.folder), "files": sub.files, "notes": sub.notes,
            "source": str(assignment.source), "template": str(template),
            "content_hash": digest}


#: The grader's files whose changes can change a grade (the section's checks are added).
GRADING_CODE = ["engine.py", "worker.py", "sandbox.py", "integrity.py", "report.py",
                "submissions.py", "nbgrader_config.py", "checks/__init__.py", "checks/core.py",
                "checks/exercise.py"]


def grading_code_digest(assignment: Assignment) -> str:
    """Digest of the grading code an assignment's hidden tests depend on."""
    import hashlib
    import re

    modules = set()
    for notebook in assignment.source.glob("*.ipynb"):
        modules |= set(re.findall(r"grader\.checks(?:\.|\s+import\s+)(\w+)",
                                  notebook.read_text(encoding="utf-8")))
    digest = hashlib.sha256()
    for name in GRADING_CODE + sorted(f"checks/{m}.py" for m in modules):
        path = GRADER_DIR / name
        digest.update(name.encode() + (path.read_bytes() if path.is_file() else b"-"))
    return digest.hexdigest()


def assignment_context(assignment: Assignment, options: Options) -> str:
    """What, besides the student's files, decides a grade: source, grading code, options."""
    return "|".join([tree_digest(assignment.source, "*.ipynb"), grading_code_digest(assignment),
                     options.grading_key(), options.deadline(assignment.name) or ""])


def exercise_columns(assignments: dict[str, Assignment], names: set[str]) -> list[str]:
    """Exercise columns of grades.csv: every assignment of the batch, in course order."""
    columns: list[str] = []
    for name, assignment in assignments.items():
        if name in names:
            columns += [e for e, _ in assignment.exercises if e not in columns]
    return columns


def write_manifest(out: Path, options: Options, subs: list[Submission],
                   assignments: dict[str, Assignment], sandbox: dict) -> None:
    names = {s.assignment for s in subs}
    manifest = {
        "shard": list(options.shard),
        "keys": [list(s.key) for s in subs],
        "exercises": exercise_columns(assignments, names),
        "options": {k: v for k, v in asdict(options).items()
                    if k not in ("solutions", "progress", "cache")},
        "sandbox": sandbox,
    }
    report.atomic_write(out / "manifest.json", json.dumps(manifest, indent=1, default=str))


def autograde(submissions: Path, out: Path, options: Options | None = None) -> Summary:
    """Grade every submission under ``submissions`` (a folder or a zip) into ``out``."""
    options = options or Options()
    started = time.monotonic()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    assignments = course_assignments(options.solutions)
    work = Path(tempfile.mkdtemp(prefix="cg-"))
    try:
        root = Path(submissions)
        if root.is_file():
            root = extract_zip(root, work / "unzipped", assignments)
        elif not root.is_dir():
            raise SystemExit(f"{submissions} is neither a folder nor a zip of submissions.")
        subs = discover(root, assignments, options.assignments)
        if not subs:
            raise SystemExit(f"No submissions in {submissions}: expected "
                             "<student>/<assignment>/<notebook>.ipynb.")
        mine = shard(subs, *options.shard)
        contexts = {name: assignment_context(a, options) for name, a in assignments.items()}
        digests = {s.key: content_hash(s, contexts.get(s.assignment, "")) for s in mine}
        existing = report.load_results(out)
        todo = [s for s in mine if options.force or s.key not in existing
                or existing[s.key].content_hash != digests[s.key] or existing[s.key].retry]
        todo_keys = {s.key for s in todo}
        kept = {s.key: existing[s.key] for s in mine if s.key not in todo_keys}
        run = Run(out, options, [s.key for s in mine],
                  exercise_columns(assignments, {s.assignment for s in subs}), kept)
        run.summary.skipped = len(kept)
        gradable = [s for s in todo if not s.problem]
        sandbox: dict = {}
        write_manifest(out, options, subs, assignments, sandbox)
        if options.progress and todo:
            from tqdm import tqdm

            run.bar = tqdm(total=len(todo), desc="grading", unit="nb", file=sys.stderr,
                           dynamic_ncols=True)
        for sub in todo:
            if sub.problem:
                run.record(problem_result(sub, digests[sub.key]))
        if gradable:
            sandbox = grade_all(gradable, assignments, digests, options, out, work, run)
            write_manifest(out, options, subs, assignments, sandbox)
        run.write_csv()
        if run.bar is not None:
            run.bar.close()
        run.summary.sandbox = sandbox
        run.summary.elapsed_s = time.monotonic() - started
        return run.summary
    finally:
        shutil.rmtree(work, ignore_errors=True)


def grade_all(gradable: list[Submission], assignments: dict[str, Assignment],
              digests: dict[tuple[str, str], str], options: Options, out: Path, work: Path,
              run: Run) -> dict:
    """Check the sandbox while the workers start and build templates, then grade.

    Returns the sandbox report (user, network, limits, torch) for the summary.
    """
    config, user_note = resolve_user(SandboxConfig(options.limits(), options.sandbox_user,
                                                   options.isolate_network))
    jobs = max(1, min(options.jobs, len(gradable)))
    threads = max(1, available_cpus() // jobs)
    checked = sandbox_cache(config, options, out)
    probe_home = checked / "home"
    settings = {"scratch": str(work / "jobs"),
                "jupyter_path": str(write_kernelspec(work / "jupyter", config)),
                "sandbox": config.to_json(), "threads": threads, "timeout": options.timeout,
                "kernel": KERNEL_NAME, "max_output_chars": options.max_output_chars,
                "out": str(out), "mpl_cache": str(probe_home / ".config" / "matplotlib")}
    templates = template_paths(gradable, assignments, options, options.cache_dir(out))
    pool = Pool(settings, worker_env(work), work, out, options, run, digests)
    workers = spawn_workers(jobs, pool.env, work, out / "logs" / "workers.log")
    pool.spawned.extend(workers)
    threads_ = [threading.Thread(target=pool.work, args=(i, workers[i], templates, assignments),
                                 daemon=True) for i in range(jobs)]
    for thread in threads_:
        thread.start()
    try:
        found = cached_probe(config, kernel_env(probe_home, checked / "records", threads),
                             checked, refresh=options.force)
        pool.fallback = {"torch": found.get("torch", ""),
                         "device": "cuda" if found.get("cuda") else "cpu"}
    except BaseException:
        pool.stop.set()
        raise
    finally:
        while not pool.templates_built.wait(1) and threads_[0].is_alive():
            pass
        if not pool.stop.is_set():
            pool.queue.extend(heaviest_first(gradable, assignments))
        pool.ready.set()
        for thread in threads_:
            thread.join()
        stop_workers(pool.spawned)
    limits = config.limits
    return {"user": user_note, "network": found.get("network", ""),
            "limits": f"cpu {limits.cpu_seconds} s, memory {limits.memory_mb} MB, "
                      f"files {limits.file_mb} MB, processes {limits.processes}",
            "torch": f"{found.get('torch')} ({pool.fallback['device']})"}


def heaviest_first(subs: list[Submission], assignments: dict[str, Assignment]) -> list[Submission]:
    """The queue order: assignments worth more points first, which take longest to grade.

    Points track the checking work (10.6: 12 points, about 16 s a notebook; 10.1: 4 points,
    about 10 s). Starting long notebooks first leaves short ones for the end, so the last
    worker to finish waits less for the others (longest-processing-time-first). The order
    within an assignment, and so every grade, is unchanged.
    """
    def points(sub: Submission) -> float:
        return sum(p for _, p in assignments[sub.assignment].exercises)

    return sorted(subs, key=points, reverse=True)


class Pool:
    """The worker threads' shared state: the queue, the start signal, the results."""

    def __init__(self, settings: dict, env: dict[str, str], work: Path, out: Path,
                 options: Options, run: Run, digests: dict[tuple[str, str], str]):
        self.settings, self.env, self.workdir, self.out = settings, env, work, out
        self.options, self.run, self.digests = options, run, digests
        self.queue: list[Submission] = []
        self.lock = threading.Lock()
        self.ready = threading.Event()  # sandbox checked, templates built: grade
        self.templates_built = threading.Event()
        self.stop = threading.Event()
        self.unprepared: dict[str, str] = {}
        self.fallback: dict[str, str] = {}
        self.spawned: list[Worker] = []

    def next_job(self) -> Submission | None:
        with self.lock:
            return self.queue.pop(0) if self.queue else None

    def error(self, sub: Submission, reason: str) -> Result:
        return Result(sub.student, sub.assignment, status=ERROR, retry=True, reason=reason,
                      content_hash=self.digests[sub.key])

    def start_worker(self, index: int) -> Worker:
        """A replacement for a worker that died: a process of its own."""
        (worker,) = spawn_workers(1, self.env, self.workdir,
                                  self.out / "logs" / f"worker-{index}.log")
        self.spawned.append(worker)
        return worker.start(self.settings)

    def work(self, index: int, worker: Worker, templates: dict[str, Path],
             assignments: dict[str, Assignment]) -> None:
        """One thread: drive one worker through the queue."""
        try:
            try:
                worker.start(self.settings)
            except WorkerFailed:
                worker.kill()
                worker = None
            if index == 0:
                try:
                    worker = worker or self.start_worker(index)
                    self.unprepared.update(build_templates(worker, templates, assignments,
                                                           self.options))
                except WorkerFailed as failure:
                    self.unprepared.update({name: str(failure) for name in templates})
                finally:
                    self.templates_built.set()
            self.ready.wait()
            while (sub := self.next_job()) is not None:
                worker = self.grade(worker, index, sub, templates[sub.assignment],
                                    assignments[sub.assignment])
        finally:
            if worker is not None:
                worker.close()

    def grade(self, worker: Worker | None, index: int, sub: Submission, template: Path,
              assignment: Assignment) -> Worker | None:
        """Grade ``sub`` on ``worker`` (started if needed); returns the worker still usable."""
        if sub.assignment in self.unprepared:
            self.run.record(self.error(sub, f"could not prepare {sub.assignment} for grading: "
                                            f"{self.unprepared[sub.assignment]}"))
            return worker
        try:
            worker = worker or self.start_worker(index)
            answer = worker.call(job_for(sub, assignment, template, self.digests[sub.key]),
                                 self.options.whole_notebook_s())
            result = Result(**answer["result"]) if "result" in answer else \
                self.error(sub, f"the grader failed: {answer.get('error')}")
        except WorkerFailed as failure:
            if worker is not None:
                worker.kill()
            worker = None
            result = self.error(sub, f"grading stopped: {failure}; its kernel was killed. Rerun "
                                     "the same command to try again")
        if not result.torch and not result.retry:  # no check ran: the kernel's torch all the same
            result.torch = self.fallback.get("torch", "")
            result.device = self.fallback.get("device", "")
        self.run.record(result)
        return worker


def sandbox_cache(config: SandboxConfig, options: Options, out: Path) -> Path:
    """The folder of the sandbox check for this configuration (kept between runs)."""
    import hashlib
    from importlib.metadata import version

    key = f"{config.to_json()}|{sys.executable}|{version('torch')}|{version('matplotlib')}"
    return options.cache_dir(out) / "sandbox" / hashlib.sha256(key.encode()).hexdigest()[:16]


def cached_probe(config: SandboxConfig, env: dict[str, str], folder: Path,
                 refresh: bool = False) -> dict:
    """:func:`grader.sandbox.probe`, run once per configuration (again with ``refresh``).

    Its HOME keeps matplotlib's font cache, which every kernel then starts with.
    """
    saved = folder / "report.json"
    if saved.is_file() and not refresh:
        return json.loads(saved.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    found = probe(config, env, folder)
    report.atomic_write(saved, json.dumps(found, indent=1))
    return found


def with_python_tools(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the interpreter's folder first on PATH: nbgrader runs ``alembic`` by name
    when it creates a gradebook."""
    tools = str(Path(sys.executable).parent)
    parts = env.get("PATH", "").split(os.pathsep)
    return env if tools in parts else {**env, "PATH": os.pathsep.join([tools, *parts])}


def warm_cache(submissions_assignments: list[str], options: Options, out: Path) -> None:
    """Build the template gradebooks and run the sandbox check into ``options.cache``.

    What ``nbgrader generate_assignment`` is to stock nbgrader: setup, done once per
    course, which a benchmark leaves out of the timed run.
    """
    from grader.engine import build_template

    os.environ.update(with_python_tools(dict(os.environ)))
    assignments = course_assignments(options.solutions)
    subs = [Submission("-", name) for name in submissions_assignments]
    for name, path in template_paths(subs, assignments, options, options.cache_dir(out)).items():
        if not path.exists():
            build_template(name, assignments[name].source, path.parent, options.deadline(name))
    config, _ = resolve_user(SandboxConfig(options.limits(), options.sandbox_user,
                                           options.isolate_network))
    checked = sandbox_cache(config, options, out)
    cached_probe(config, kernel_env(checked / "home", checked / "records", 1), checked)


def stop_workers(workers: list[Worker], grace: float = 60) -> None:
    """Let the worker processes exit after their last job; kill what is left."""
    for worker in workers:
        worker.close()
    for worker in workers:
        if worker.process is not None:
            try:
                worker.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()


def template_paths(subs: list[Submission], assignments: dict[str, Assignment], options: Options,
                   cache: Path) -> dict[str, Path]:
    """Where each assignment's template gradebook is cached (built if absent)."""
    import nbgrader

    paths = {}
    for name in sorted({s.assignment for s in subs}):
        digest = tree_digest(assignments[name].source)
        key = f"{digest}|{options.deadline(name)}|{nbgrader.__version__}"
        import hashlib

        short = hashlib.sha256(key.encode()).hexdigest()[:16]
        paths[name] = cache / "templates" / f"{name}-{short}" / "gradebook.db"
    return paths


def build_templates(worker: Worker, templates: dict[str, Path],
                    assignments: dict[str, Assignment], options: Options) -> dict[str, str]:
    """Build the missing template gradebooks; returns the assignments that failed, with why."""
    failed = {}
    for name, path in templates.items():
        if path.exists():
            continue
        answer = worker.call({"type": "template", "assignment": name,
                              "source": str(assignments[name].source),
                              "dest": str(path.parent / "build"),
                              "duedate": options.deadline(name)}, WORKER_START_S)
        if "template" not in answer:
            failed[name] = str(answer.get("error"))
            continue
        os.replace(answer["template"], path)
        shutil.rmtree(path.parent / "build", ignore_errors=True)
    return failed


# ---------------------------------------------------------------- benchmark


def cpu_seconds() -> float:
    """CPU time of this process and its finished children so far."""
    import resource

    me, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def stock_nbgrader(submissions: Path, assignments: list[str], timeout: int,
                   solutions: Path = SOLUTIONS) -> tuple[float, float, dict]:
    """Wall and CPU seconds of stock serial ``nbgrader autograde`` on ``submissions``; scores.

    ``generate_assignment`` (setup, not grading) runs before the clock starts. The kernels
    get ``COURSE_QUICK=1`` as ours do, so both grade the same short version of a notebook.
    """
    from grader.submissions import find_root

    with tempfile.TemporaryDirectory(prefix="cg-stock-") as scratch:
        course = Path(scratch)
        shutil.copy(GRADER_DIR / "nbgrader_config.py", course / "nbgrader_config.py")
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
