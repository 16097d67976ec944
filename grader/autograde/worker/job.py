"""Grading one submission, inside a worker: everything from the scratch course to the outbox.

1. a scratch nbgrader course with the source, the template gradebook and the student's
   files; the kernel's environment and folders (:mod:`grader.autograde.sandbox.config`);
2. ``nbgrader autograde`` (:mod:`grader.autograde.worker.nbgrader_runs`);
3. the points back from the scratch gradebook, the integrity records verified
   (:mod:`grader.autograde.worker.verify`), how each check ended
   (:mod:`grader.autograde.worker.outcomes`, for the class report), the cells examined
   (:mod:`grader.autograde.worker.cell_findings`), the status settled
   (:func:`grader.results.settle`);
4. corrected points saved where nbgrader's feedback reads them, ``nbgrader
   generate_feedback``, and the feedback pages and graded notebook left in the job's
   outbox, which the host moves into OUT (the host is OUT's one writer).

:class:`NbgraderHandler` is what a worker serves jobs with; a stand-in with the same two
methods (``grade``, ``template``) can take its place (``Options.handler``).
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

from grader.autograde.messages import (
    Graded,
    GradeJob,
    GradingOptions,
    TemplateBuilt,
    TemplateJob,
    WorkerSettings,
)
from grader.autograde.sandbox.config import kernel_env, sandbox_user
from grader.autograde.worker import nbgrader_runs
from grader.autograde.worker.cell_findings import describe_cells
from grader.autograde.worker.feedback_note import add_note, note_html
from grader.autograde.worker.outcomes import read_outcomes
from grader.autograde.worker.verify import apply_integrity, check_records
from grader.paths import CourseLayout
from grader.results import Result, exercise_name, settle


class NbgraderHandler:
    """Grades with nbgrader: what a worker serves its jobs with."""

    def __init__(self, settings: WorkerSettings):
        self.settings = settings

    def grade(self, job: GradeJob) -> Graded:
        return grade(job, self.settings)

    def template(self, job: TemplateJob) -> TemplateBuilt:
        dest = Path(job.dest)
        dest.mkdir(parents=True, exist_ok=True)
        path = nbgrader_runs.build_template(job.assignment, Path(job.source), dest, job.duedate)
        return TemplateBuilt(str(path))


# ---------------------------------------------------------------- scratch course


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:40]


def prepare_course(job: GradeJob, scratch: Path) -> CourseLayout:
    """A scratch course: the source, the template gradebook, the student's files."""
    course = CourseLayout(scratch / "course")
    shutil.copytree(job.source, course.source(job.assignment))
    shutil.copy(job.template, course.gradebook)
    target = course.submitted(job.student, job.assignment)
    target.mkdir(parents=True)
    placed_as = dict(job.placed_as)
    for name in job.files:
        graded_as = placed_as.get(name, name)
        (target / graded_as).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(job.folder) / name, target / graded_as)
    return course


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


def prepare_kernel_env(settings: WorkerSettings, scratch: Path) -> tuple[Path, Path]:
    """Set this process's environment to the kernel's (kernels inherit it); make its folders."""
    home, records, runtime = scratch / "home", scratch / "records", runtime_dir(scratch)
    (home / "tmp").mkdir(parents=True)
    records.mkdir()
    mpl = Path(settings.mpl_cache)
    if mpl.is_dir():
        shutil.copytree(mpl, home / ".config" / "matplotlib")
    profile = home / ".ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    env = kernel_env(home, records, settings.threads, {
        "JUPYTER_PATH": settings.jupyter_path,
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(scratch / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(scratch / "jupyter-data"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "TQDM_DISABLE": "1",
    })
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # tempfile caches TMPDIR: make it read this job's
    ids = sandbox_user(settings.sandbox)
    if ids is not None:
        for path in [home, *home.rglob("*"), records, runtime]:
            os.chown(path, *ids)
    return records, runtime


# ---------------------------------------------------------------- one job


def grade(job: GradeJob, settings: WorkerSettings) -> Graded:
    """Grade one submission; never raises (a failure becomes an error result)."""
    started = time.monotonic()
    result = Result(job.student, job.assignment, content_hash=job.content_hash,
                    notes=list(job.notes), flags=[f"review: {why}" for why in job.review])
    name = f"{safe_name(job.student)}-{uuid.uuid4().hex[:8]}"
    scratch, outbox = Path(settings.scratch) / name, Path(settings.outbox) / name
    scratch.mkdir(parents=True)
    try:
        grade_in(scratch, outbox, job, settings, result)
    except Exception as error:  # noqa: BLE001 - the batch must go on
        traceback.print_exc()
        result.failures.append(f"the grader failed: {type(error).__name__}: {error}")
        settle(result)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    scrub(result, str(Path(settings.scratch).parent))
    result.elapsed_s = round(time.monotonic() - started, 2)
    return Graded(result, str(outbox) if outbox.is_dir() else "")


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


def grade_in(scratch: Path, outbox: Path, job: GradeJob, settings: WorkerSettings,
             result: Result) -> None:
    """Autograde, read back, verify, correct, write feedback: everything for one job."""
    phase = Phases()
    options = settings.grading
    try:
        with phase("prepare"):
            course = prepare_course(job, scratch)
            records, runtime = prepare_kernel_env(settings, scratch)
            source = course.source(job.assignment)
        with phase("autograde"):
            run = nbgrader_runs.run_autograde(course.root, job.assignment, job.student, options,
                                              source)
        if runtime.parent != scratch:
            shutil.rmtree(runtime, ignore_errors=True)
        with phase("verify"):
            grades = read_back(result, run, course.root)
            if grades is None:
                return
            examine(result, run, records, options.timeout)
            conclude(result, run)
        if run.ok:
            with phase("feedback"):
                write_feedback(result, run, grades, options, source)
        with phase("publish"):
            publish(result, run, outbox)
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
        # most often the grader's own failure: graded again on the next run
        result.failures.append(f"nbgrader could not grade this notebook: {run.log or error}")
        settle(result)
        return None
    result.max_points = {exercise_name(g): p for g, p in grades.max_points.items()}
    result.points = {exercise_name(g): float(p or 0) for g, p in grades.points.items()}
    result.submitted_at, result.seconds_late = grades.timestamp, grades.seconds_late
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
    result.outcomes, result.mistakes = read_outcomes(records, list(result.max_points))
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
                   options: GradingOptions, source: Path) -> None:
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
    """Status and reason from everything gathered (nbgrader's own failure first)."""
    failure = f"nbgrader could not grade this notebook: {run.log}"
    if not run.ok and failure not in result.failures:
        result.failures.insert(0, failure)
    settle(result)


def publish(result: Result, run: nbgrader_runs.NbgraderRun, outbox: Path) -> None:
    """Leave the feedback (with the grader's note) and the graded notebook in ``outbox``
    (``feedback/``, ``autograded/``) for the host to move into OUT."""
    student, assignment = result.student_id, result.assignment
    note = note_html(result)
    outbox.mkdir(parents=True, exist_ok=True)
    for page in sorted(run.feedback(student, assignment).glob("*.html")):
        text = add_note(page.read_text(encoding="utf-8"), note)
        (outbox / "feedback").mkdir(parents=True, exist_ok=True)
        (outbox / "feedback" / page.name).write_text(text, encoding="utf-8")
    for notebook in sorted(run.autograded(student, assignment).glob("*.ipynb")):
        (outbox / "autograded").mkdir(parents=True, exist_ok=True)
        shutil.copy(notebook, outbox / "autograded" / notebook.name)
