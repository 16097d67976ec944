"""Grading one submission, inside a worker: everything from the scratch course to OUT.

1. a scratch nbgrader course with the source, the template gradebook and the student's
   files; the kernel's environment and folders (:mod:`grader.autograde.sandbox`);
2. ``nbgrader autograde`` (:mod:`grader.autograde.nbgrader_runs`);
3. the points back from the scratch gradebook, the integrity records verified
   (:mod:`grader.autograde.verify`), the cells examined (:mod:`grader.autograde.cells`);
4. corrected points saved where nbgrader's feedback reads them, ``nbgrader
   generate_feedback``, and the feedback and graded notebook copied into OUT.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import tempfile
import time
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path

from grader.autograde import nbgrader_runs, report
from grader.autograde.cells import describe_cells
from grader.autograde.report import ERROR, FLAGGED, Result
from grader.autograde.sandbox import SandboxConfig, kernel_env, sandbox_user
from grader.autograde.submissions import exercise_name
from grader.autograde.verify import apply_integrity, check_records

# ---------------------------------------------------------------- scratch course


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:40]


def prepare_course(job: dict, scratch: Path) -> Path:
    """A scratch course: the source, the template gradebook, the student's files."""
    root = scratch / "course"
    assignment, student = job["assignment"], job["student"]
    shutil.copytree(job["source"], root / "solutions" / assignment)
    shutil.copy(job["template"], root / "gradebook.db")
    target = root / "submitted" / student / assignment
    target.mkdir(parents=True)
    for name in job["files"]:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(job["folder"]) / name, target / name)
    return root


def runtime_dir(scratch: Path) -> Path:
    """Where kernels' Unix sockets go: a short path (sockets allow about 100 characters)."""
    path = scratch / "rt"
    if len(str(path)) > 50:
        path = Path(tempfile.mkdtemp(prefix="cg-rt-", dir="/tmp"))
    path.mkdir(parents=True, exist_ok=True)
    return path


#: IPython settings of a graded kernel. No grade depends on a figure, and drawing them (PNGs
#: the feedback page would carry) cost 0.5-1.5 s of CPU per notebook: figures show as text.
#: No input history either: nobody reads it. Progress bars are off too (``TQDM_DISABLE`` in
#: the kernel's environment): a widget nobody watches, which a static page cannot show.
KERNEL_CONFIG = """c = get_config()  # noqa
c.InlineBackend.figure_formats = set()
c.HistoryManager.enabled = False
"""


def prepare_kernel_env(settings: dict, scratch: Path) -> tuple[Path, Path]:
    """Set this process's environment to the kernel's (kernels inherit it); make its folders."""
    home, records, runtime = scratch / "home", scratch / "records", runtime_dir(scratch)
    (home / "tmp").mkdir(parents=True)
    records.mkdir()
    mpl = Path(settings["mpl_cache"])
    if mpl.is_dir():
        shutil.copytree(mpl, home / ".config" / "matplotlib")
    profile = home / ".ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    env = kernel_env(home, records, settings["threads"], {
        "JUPYTER_PATH": settings["jupyter_path"],
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(scratch / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(scratch / "jupyter-data"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "TQDM_DISABLE": "1",
    })
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # tempfile caches TMPDIR: make it read this job's
    ids = sandbox_user(SandboxConfig.from_json(settings["sandbox"]))
    if ids is not None:
        for path in [home, *home.rglob("*"), records, runtime]:
            os.chown(path, *ids)
    return records, runtime


# ---------------------------------------------------------------- one job


def grade(job: dict, settings: dict) -> Result:
    """Grade one submission; never raises (a failure becomes an error result)."""
    started = time.monotonic()
    result = Result(job["student"], job["assignment"], content_hash=job["content_hash"],
                    notes=list(job.get("notes", [])))
    scratch = Path(settings["scratch"]) / f"{safe_name(job['student'])}-{uuid.uuid4().hex[:8]}"
    scratch.mkdir(parents=True)
    try:
        grade_in(scratch, job, settings, result)
    except Exception as error:  # noqa: BLE001 - the batch must go on
        traceback.print_exc()
        result.status, result.retry = ERROR, True
        result.reason = f"the grader failed: {type(error).__name__}: {error}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    scrub(result, str(Path(settings["scratch"]).parent))
    result.elapsed_s = round(time.monotonic() - started, 2)
    return result


def scrub(result: Result, scratch: str) -> None:
    """Replace this run's temporary paths in messages: the same submission must give the
    same row in any run (serial, parallel, sharded)."""
    result.reason = result.reason.replace(scratch, "<scratch>")
    result.notes = [n.replace(scratch, "<scratch>") for n in result.notes]
    result.flags = [f.replace(scratch, "<scratch>") for f in result.flags]


class Phases:
    """Wall and CPU seconds of each grading step. CPU counts this worker and the processes
    it started and reaped (the kernels): ``autograde_cpu`` is mostly the learner's notebook."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        wall, cpu = time.monotonic(), cpu_seconds()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - wall, 2)
            self.seconds[f"{name}_cpu"] = round(cpu_seconds() - cpu, 2)


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (user and system)."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def grade_in(scratch: Path, job: dict, settings: dict, result: Result) -> None:
    """Autograde, read back, verify, correct, write feedback: everything for one job."""
    student, assignment = job["student"], job["assignment"]
    phase = Phases()
    try:
        with phase("prepare"):
            root = prepare_course(job, scratch)
            records, runtime = prepare_kernel_env(settings, scratch)
            options = nbgrader_runs.GradingOptions(timeout=settings["timeout"],
                                                   kernel_name=settings["kernel"],
                                                   max_output_chars=settings["max_output_chars"])
            source = root / "solutions" / assignment
        with phase("autograde"):
            run = nbgrader_runs.run_autograde(root, assignment, student, options, source)
        if runtime.parent != scratch:
            shutil.rmtree(runtime, ignore_errors=True)
        with phase("verify"):
            grades = read_back(result, run, root)
            if grades is None:
                return
            examine(result, run, records, settings["timeout"])
            conclude(result, run)
        if run.ok:
            with phase("feedback"):
                write_feedback(result, run, grades, options, source)
        with phase("publish"):
            publish(result, run, Path(settings["out"]))
    finally:
        result.timings = phase.seconds


def read_back(result: Result, run: nbgrader_runs.NbgraderRun, root: Path
              ) -> nbgrader_runs.GradebookGrades | None:
    """Points, lateness from the scratch gradebook; None when nbgrader saved nothing."""
    try:
        grades = nbgrader_runs.read_grades(root, result.assignment, result.student_id)
    except Exception as error:  # noqa: BLE001 - nbgrader stopped before saving a submission
        if run.ok:
            raise
        result.status, result.retry = ERROR, True  # most often the grader's own failure
        result.failures.append(f"nbgrader could not grade this notebook: {run.log or error}")
        result.reason = result.failures[-1]
        return None
    result.max_points = {exercise_name(g): p for g, p in grades.max_points.items()}
    result.points = {exercise_name(g): float(p or 0) for g, p in grades.points.items()}
    result.submitted_at, result.seconds_late = grades.timestamp, grades.seconds_late
    if result.seconds_late > 0:
        result.notes.append(f"submitted {result.seconds_late / 3600:.1f} h after the deadline")
    manual = [exercise_name(g) for g, p in grades.points.items() if p is None]
    if manual and run.ok:
        result.notes.append(f"needs manual grading: {', '.join(manual)} (counted as 0)")
    return grades


def examine(result: Result, run: nbgrader_runs.NbgraderRun, records: Path, timeout: int) -> None:
    """Integrity records (verified here, a process that never ran learner code) and what
    happened in the notebook's cells; fixes points and collects flags and notes."""
    verdicts, problems = check_records(records)
    result.flags.extend(problems)
    first = next(iter(verdicts.values()), {})
    result.device, result.torch = first.get("device", ""), first.get("torch", "")
    apply_integrity(result, list(result.max_points), verdicts)
    errors = []
    for path in sorted(run.autograded(result.student_id, result.assignment).glob("*.ipynb")):
        cells = describe_cells(path, timeout)
        result.notes.extend(cells.notes)
        errors.extend(cells.errors)
        result.flags.extend(f"review: {s}" for s in cells.suspicious)
        result.failures.extend(cells.failures)
    if errors:
        result.notes.append(f"errors outside the test cells: {', '.join(errors[:3])}"
                            + (f" and {len(errors) - 3} more" if len(errors) > 3 else ""))
    result.score = sum(result.points.values())
    result.max_score = sum(result.max_points.values())


def write_feedback(result: Result, run: nbgrader_runs.NbgraderRun, grades: nbgrader_runs.GradebookGrades,
                   options: nbgrader_runs.GradingOptions, source: Path) -> None:
    """Save corrected points as nbgrader manual scores, then nbgrader generate_feedback."""
    by_exercise = {exercise_name(g): g for g in grades.points}
    corrected = {by_exercise[e]: p for e, p in result.points.items()
                 if p != float(grades.points[by_exercise[e]] or 0)}
    if corrected:
        nbgrader_runs.override_scores(run.root, result.assignment, result.student_id, corrected)
    nbgrader_runs.run_feedback(run, result.assignment, result.student_id, options, source)
    if not run.feedback_ok:
        result.notes.append(f"no feedback page: {run.log}")
        conclude(result, run)


def conclude(result: Result, run: nbgrader_runs.NbgraderRun) -> None:
    """Status and short reason from everything gathered."""
    died = [n for n in result.notes if "kernel died" in n or "kernel ignored" in n
            or "not run" in n or "stopped answering" in n]
    if not run.ok:
        result.failures.insert(0, f"nbgrader could not grade this notebook: {run.log}")
    if result.failures:  # the grader's failure, never the learner's zero: graded again
        result.status, result.retry = ERROR, True
    elif died:
        result.status = ERROR
    if result.flags:
        result.status = FLAGGED
    reasons = result.flags + result.failures + [n for n in result.notes if n not in result.flags]
    result.reason = "; ".join(dict.fromkeys(reasons))


def publish(result: Result, run: nbgrader_runs.NbgraderRun, out: Path) -> None:
    """Copy the feedback (with the grader's note) and the graded notebook into OUT."""
    student, assignment = result.student_id, result.assignment
    feedback_dir = out / "feedback" / student / assignment
    graded_dir = out / "autograded" / student / assignment
    for folder in (feedback_dir, graded_dir):
        if folder.exists():
            shutil.rmtree(folder)
    note = report.note_html(result)
    for page in sorted(run.feedback(student, assignment).glob("*.html")):
        text = report.add_note(page.read_text(encoding="utf-8"), note)
        report.atomic_write(feedback_dir / page.name, text)
        result.feedback.append(str((feedback_dir / page.name).relative_to(out)))
    for notebook in sorted(run.autograded(student, assignment).glob("*.ipynb")):
        graded_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(notebook, graded_dir / notebook.name)


def build_template(job: dict) -> dict:
    dest = Path(job["dest"])
    dest.mkdir(parents=True, exist_ok=True)
    path = nbgrader_runs.build_template(job["assignment"], Path(job["source"]), dest, job.get("duedate"))
    return {"template": str(path)}
