"""Grade a whole class with nbgrader: ``python -m grader autograde SUBMISSIONS --out OUT``.

How a run goes (docs/grading.md has the instructor's version):

1. Find the submissions (:mod:`grader.autograde.host.submissions`); anything that cannot
   be graded (missing, empty, misnamed, invalid JSON) becomes an error row at once.
2. Take this run's shard (``--shard K/N``) and skip what an earlier run in the same OUT
   already graded from identical content and code (:mod:`grader.autograde.host.fingerprint`;
   ``--force`` regrades).
3. Check the sandbox (:mod:`grader.autograde.host.sandbox`): torch must import under the
   limits.
4. Start ``--jobs`` workers (:mod:`grader.autograde.host.pool`); each grades one
   submission at a time (:mod:`grader.autograde.worker.job`). Every result goes into OUT
   as it completes, by this process alone (:mod:`grader.autograde.host.out_folder`).

Earlier results in OUT that the batch does not hold stay rows of grades.csv, the report and
the export (:func:`carry_over`); a student a new batch of her assignment lacks is marked.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from grader.autograde.host.cache import cached_probe, sandbox_cache, template_paths
from grader.autograde.host.file_guard import Guard, grading_folders
from grader.autograde.host.fingerprint import assignment_context, content_hash, grading_code_digest
from grader.autograde.host.options import Options, Summary, available_cpus
from grader.autograde.host.out_folder import Out
from grader.autograde.host.pool import Pool, spawn_workers, stop_workers, worker_env
from grader.autograde.host.rerun import check_rerun
from grader.autograde.host.submissions import (
    Assignment,
    Submission,
    course_assignments,
    discover,
    extract_zip,
    read_lms,
    read_unplaced,
    shard,
)
from grader.autograde.host.submitted_at import SubmittedAt, read_submitted_at
from grader.autograde.messages import WorkerSettings
from grader.autograde.sandbox.config import kernel_env, write_kernelspec
from grader.errors import SubmissionsError, UsageError
from grader.late import load_policy
from grader.results import ERROR, FLAGGED, OK, Result, load_results, save_result, settle


class Run:
    """One autograde run as it goes: the results, OUT, the counts, the progress bar."""

    def __init__(self, out: Out, keys: list[tuple[str, str]], kept: dict[tuple[str, str], Result],
                 carried: dict[tuple[str, str], Result] | None = None):
        self.out, self.keys, self.results = out, keys, dict(kept)
        self.carried = [carried[k] for k in sorted(carried or {})]
        self.lock = threading.Lock()
        self.summary = Summary(out=str(out.root), skipped=len(kept), carried=len(self.carried),
                               absent=[r.kept_note for r in self.carried if r.missing_from])
        self.bar = None
        out.start([kept[k] for k in keys if k in kept], self.carried)

    def record(self, result: Result, outbox: str = "") -> None:
        """Keep one finished result in OUT; advance the counts and the progress bar."""
        with self.lock:
            self.out.record(result, outbox)
            self.results[result.key] = result
            self.summary.graded += 1
            self.summary.counts[result.status] += 1
            if self.bar is not None:
                self.bar.update(1)
                self.bar.set_postfix(ok=self.summary.counts[OK],
                                     errors=self.summary.counts[ERROR],
                                     flagged=self.summary.counts[FLAGGED], refresh=False)

    def finish(self) -> None:
        self.out.finish([self.results[k] for k in self.keys if k in self.results] + self.carried)
        if self.bar is not None:
            self.bar.close()


def problem_result(sub: Submission, digest: str) -> Result:
    """The error row of a submission that cannot be graded."""
    return settle(Result(sub.student, sub.assignment, notes=list(sub.notes), content_hash=digest,
                         submitted=sub.submitted), problem=sub.problem)


def exercise_columns(assignments: dict[str, Assignment], names: set[str]) -> list[str]:
    """Exercise columns of grades.csv: every assignment of the batch, in course order."""
    columns: list[str] = []
    for name, assignment in assignments.items():
        if name in names:
            columns += [e for e, _ in assignment.exercises if e not in columns]
    return columns


def carry_over(out: Path, existing: dict[tuple[str, str], Result], subs: list[Submission],
               source: str) -> dict[tuple[str, str], Result]:
    """The earlier results in OUT that this batch does not hold: they stay, rows of grades.csv,
    the report and the export as they were. ``source`` names the batch when it is a new one of
    the class (not a regrade's): a row of one of its assignments whose student it lacks (a
    withdrawn submission, a download of one section) is marked ``missing_from`` it, and saved."""
    batch = {s.key for s in subs}
    assignments = {s.assignment for s in subs}
    carried = {}
    for key, result in existing.items():
        if key in batch:
            continue
        if source and key[1] in assignments and not result.missing_from:
            result.missing_from = source
            save_result(out, result)
        carried[key] = result
    return carried


def batch_name(submissions: Path) -> str:
    """How a row kept from an earlier run names the batch that lacked its student."""
    return f"{Path(submissions).name} of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"


def manifest(options: Options, subs: list[Submission], exercises: list[str], sandbox: dict,
             late_policy: str = "", times: SubmittedAt | None = None) -> dict:
    """What ``merge``, ``gradebook``, ``export`` and a rerun need to know of the run."""
    return {"shard": list(options.shard), "keys": [list(s.key) for s in subs],
            "exercises": exercises,
            "options": {k: v for k, v in asdict(options).items()
                        if k not in ("solutions", "progress", "cache", "handler")},
            "late_policy": late_policy,
            "submitted_at": {"file": str(times.path), "sha256": times.sha256} if times else {},
            "sandbox": sandbox}


def submission_times(options: Options, subs: list[Submission], lms: dict) -> SubmittedAt | None:
    """--submitted-at's times for the batch (None without the option), checked."""
    if not options.submitted_at:
        return None
    times = read_submitted_at(Path(options.submitted_at), subs, lms)
    (assignment,) = {s.assignment for s in subs}
    if not options.deadline(assignment):
        raise UsageError(f"--submitted-at needs the assignment's deadline: add --deadline "
                         f"{assignment}=ISO (e.g. 2026-12-01T23:59:00+00:00).")
    options.submitted_at = str(times.path)  # regrade reads it from the manifest, from anywhere
    return times


def autograde(submissions: Path, out: Path, options: Options | None = None) -> Summary:
    """Grade every submission under ``submissions`` (a folder or a zip) into ``out``."""
    options = options or Options()
    started = time.monotonic()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    assignments = course_assignments(options.source())
    work = Path(tempfile.mkdtemp(prefix="cg-"))
    try:
        root = Path(submissions).resolve()  # workers run elsewhere: a relative path would not do
        if root.is_file():
            root = extract_zip(root, work / "unzipped", assignments, options.assignments)
        elif not root.is_dir():
            raise SubmissionsError(f"{submissions} is neither a folder nor a zip of submissions.")
        subs = discover(root, assignments, options.assignments)
        if not subs:
            raise SubmissionsError(f"No submissions in {submissions}: expected "
                                   "<student>/<assignment>/<notebook>.ipynb.")
        mine = shard(subs, *options.shard)
        only = set(options.students or ())
        if only:  # a regrade of these students: the others' results stay as they are
            unknown = sorted(only - {s.student for s in subs})
            if unknown:
                raise SubmissionsError(f"No submissions of {', '.join(unknown)} in {submissions}.")
        damaged: list[Path] = []
        existing = load_results(out, damaged)
        exercises = exercise_columns(assignments, {a for _, a in [*existing, *(s.key for s in subs)]})
        lms = read_lms(root)
        times = submission_times(options, subs, lms)
        policy = load_policy(options.source().parent)
        now = manifest(options, subs, exercises, {}, policy.describe(), times)
        warnings = check_rerun(out, now, {a for s, a in existing}, options)
        code = grading_code_digest()
        contexts = {name: assignment_context(a, options, code) for name, a in assignments.items()}
        digests = {s.key: content_hash(s, contexts.get(s.assignment, "")) for s in mine}
        todo = [s for s in mine if s.student in only] if only else [
            s for s in mine if options.force or s.key not in existing
            or existing[s.key].content_hash != digests[s.key] or existing[s.key].retry]
        ungraded = [f"{s.student}/{s.assignment}" for s in mine
                    if only and s.student not in only and s.key not in existing]
        if ungraded:
            raise SubmissionsError(f"{out} has no earlier result for {', '.join(ungraded[:3])}"
                                   f"{' ...' if len(ungraded) > 3 else ''}: grade the whole class "
                                   "first (autograde), then regrade single students.")
        todo_keys = {s.key for s in todo}
        kept = {s.key: existing[s.key] for s in mine if s.key not in todo_keys}
        for result in kept.values():
            if result.missing_from:  # the student is back in this batch
                result.missing_from = ""
                save_result(out, result)
        carried = carry_over(out, existing, subs, "" if only else batch_name(submissions))
        now["kept"] = sorted(list(k) for k in carried)
        folder = Out(out, exercises, policy, lms, options.deadline, times.times if times else None)
        folder.sources = {s.key: s.folder for s in mine if s.folder}
        run = Run(folder, [s.key for s in mine], kept, carried)
        run.summary.damaged = len(damaged)
        run.summary.unplaced = read_unplaced(root)
        batch = str(Path(submissions).resolve())
        run.summary.not_graded = folder.write_not_graded(batch, run.summary.unplaced)
        run.summary.warnings = warnings + (times.text() if times else [])
        gradable = [s for s in todo if not s.problem]
        folder.write_manifest(now)
        if options.progress and todo:
            from tqdm import tqdm

            run.bar = tqdm(total=len(todo), desc="grading", unit="nb", file=sys.stderr,
                           dynamic_ncols=True)
        for sub in todo:
            if sub.problem:
                run.record(problem_result(sub, digests[sub.key]))
        if gradable:
            now["sandbox"] = grade_all(gradable, assignments, digests, options, out, work, run)
            folder.write_manifest(now)
        run.finish()
        run.summary.sandbox = now["sandbox"]
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
    config, notes = options.sandbox(hidden=[out, work, *{s.folder.parent.parent for s in gradable}])
    if not config.bwrap:
        print(f"WARNING: kernels' files are {notes['files']}. The grader checks its own files "
              "after every notebook instead.", file=sys.stderr)
    jobs = max(1, min(options.jobs, len(gradable)))
    threads = max(1, available_cpus() // jobs)
    checked = sandbox_cache(config, options, out)
    settings = WorkerSettings(
        scratch=str(work / "jobs"), outbox=str(work / "outbox"),
        jupyter_path=str(write_kernelspec(work / "jupyter", config)), sandbox=config,
        grading=options.grading(), threads=threads,
        mpl_cache=str(checked / "home" / ".config" / "matplotlib"))
    templates = template_paths(gradable, assignments, options, options.cache_dir(out))
    logs = out / "logs"
    pool = Pool(settings, worker_env(work), work, logs, options, run.record, digests)
    if not config.bwrap:  # kernels can write the grader's files: check them after each one
        pool.guard = Guard(grading_folders())
    workers = spawn_workers(jobs, pool.env, work, logs / "workers.log", options.handler)
    pool.spawned.extend(workers)
    threads_ = [threading.Thread(target=pool.work, args=(i, workers[i], templates, assignments),
                                 daemon=True) for i in range(jobs)]
    for thread in threads_:
        thread.start()
    try:
        found = cached_probe(config, kernel_env(checked / "home", checked / "records", threads),
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
    return {"files": notes["files"], "user": notes["user"], "network": found.get("network", ""),
            "limits": f"cpu {limits.cpu_seconds} s, memory {limits.memory_mb} MB, "
                      f"files {limits.file_mb} MB, processes {limits.processes}",
            "torch": f"{found.get('torch')} ({pool.fallback['device']})"}


def heaviest_first(subs: list[Submission], assignments: dict[str, Assignment]) -> list[Submission]:
    """The queue order: assignments worth more points first, which take longest to grade.

    Points track the checking work (10.6: 18 points, about 7 s a notebook; 10.5: 6 points,
    about 4 s; measured 2026-12-01). Starting long notebooks first leaves short ones for the
    end, so the last worker to finish waits less for the others
    (longest-processing-time-first). The order within an assignment, and so every grade, is
    unchanged.
    """
    def points(sub: Submission) -> float:
        return sum(p for _, p in assignments[sub.assignment].exercises)

    return sorted(subs, key=points, reverse=True)
