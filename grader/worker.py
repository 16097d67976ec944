"""A grading worker: grades submissions one at a time, for ``python -m grader autograde``.

``python -I -m grader.worker`` reads a settings line, then one job per line (JSON) on
stdin, and answers each with one JSON line on its original stdout (anything else it or
nbgrader prints goes to stderr, the worker's log). It imports nbgrader and torch once and
keeps them, which is most of what makes ``--jobs N`` fast.

The worker itself never runs learner code: nbgrader starts every kernel through the
sandbox launcher (:mod:`grader.sandbox`). That is why it may also verify the integrity
records (:func:`grader.integrity.verify_record`, the same function ``python -m grader
verify`` runs): it is a clean process in the sense the integrity design needs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

import nbformat

from grader import engine, report
from grader.report import ERROR, FLAGGED, Result
from grader.sandbox import SandboxConfig, kernel_env, sandbox_user
from grader.submissions import exercise_name

#: Patterns in a learner's own code cells that have no business in an exercise.
SUSPICIOUS = {
    r"\bCOURSE_GRADING_DIR\b": "reads the grading folder variable COURSE_GRADING_DIR",
    r"record\.pt\b": "touches the integrity records (*.record.pt)",
    r"^\s*(?:from|import)\s+grader\b": "imports the grader package",
    r"\bsys\.modules\s*\[[^\]]*\]\s*=": "assigns into sys.modules",
}


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


def prepare_kernel_env(settings: dict, scratch: Path) -> tuple[Path, Path]:
    """Set this process's environment to the kernel's (kernels inherit it); make its folders."""
    home, records, runtime = scratch / "home", scratch / "records", runtime_dir(scratch)
    (home / "tmp").mkdir(parents=True)
    records.mkdir()
    mpl = Path(settings["mpl_cache"])
    if mpl.is_dir():
        shutil.copytree(mpl, home / ".config" / "matplotlib")
    env = kernel_env(home, records, settings["threads"], {
        "JUPYTER_PATH": settings["jupyter_path"],
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTER_CONFIG_DIR": str(scratch / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(scratch / "jupyter-data"),
        "JUPYTER_PLATFORM_DIRS": "1",
    })
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # tempfile caches TMPDIR: make it read this job's
    ids = sandbox_user(SandboxConfig.from_json(settings["sandbox"]))
    if ids is not None:
        for path in [home, *home.rglob("*"), records, runtime]:
            os.chown(path, *ids)
    return records, runtime


# ---------------------------------------------------------------- integrity


def check_records(folder: Path) -> tuple[dict[str, dict], list[str]]:
    """Verdicts of every record, by exercise, as the clean process sees them; plus problems."""
    from grader import integrity

    verdicts, problems = {}, []
    for path in sorted(folder.glob(f"*{integrity.RECORD_SUFFIX}")):
        try:
            record = integrity.load_record(path)
            verdict = integrity.verify_record(path)
        except Exception as error:  # noqa: BLE001 - a record is learner-writable data
            problems.append(f"record {path.name} is unreadable ({type(error).__name__}: "
                            f"{str(error)[:120]})")
            continue
        verdicts[verdict.exercise] = {"passed": verdict.passed, "flags": list(verdict.flags),
                                      "reason": verdict.reason, "device": record.get("device", ""),
                                      "torch": record.get("torch", ""),
                                      "file": path.name}
    return verdicts, problems


def apply_integrity(result: Result, exercises: list[str], verdicts: dict[str, dict]) -> None:
    """Zero exercises whose passing test cell is not backed by a clean, verified record."""
    from grader.checks import EXERCISES

    for exercise, verdict in verdicts.items():
        for flag in verdict["flags"]:
            result.flags.append(f"{exercise}: {flag}")
        if verdict["file"] != f"{exercise}.record.pt":
            result.flags.append(f"{exercise}: its record was saved under another name "
                                f"({verdict['file']})")
    for exercise in exercises:
        if exercise not in EXERCISES:
            continue  # not a hidden check of this course: nothing to verify
        points = result.points.get(exercise, 0)
        verdict = verdicts.get(exercise)
        problem = ""
        if points > 0 and verdict is None:
            problem = ("its test cell passed but the hidden check saved no record (the check "
                       "was replaced or skipped)")
        elif points > 0 and not verdict["passed"]:
            problem = "its test cell passed but " + (
                verdict["reason"] or "the check's record says it failed")
        if problem:
            result.flags.append(f"{exercise}: {problem}")
        if problem or (verdict is not None and verdict["flags"]):
            result.points[exercise] = 0.0


# ---------------------------------------------------------------- reading the graded notebook


def describe_cells(path: Path, timeout: int) -> tuple[list[str], list[str], list[str]]:
    """(notes, errors, suspicious) about the executed notebook, for the report."""
    nb = nbformat.read(path, as_version=4)
    notes, errors, suspicious = [], [], []
    for number, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        label = meta.get("grade_id") or f"cell {number}"
        mark = cell.metadata.get(engine.MARK, {})
        if cell.source.startswith("# " + engine.RESTORED_NOTE.split("{")[0]):
            notes.append(f"test cell {label} was missing or had lost its metadata: restored")
        if mark.get("edited"):
            notes.append(f"read-only cell {label} had been edited: restored from the source")
        if mark.get("duplicate_of"):
            notes.append(f"test cell {mark['duplicate_of']} appears twice: the last copy was "
                         "graded, the other ran as a plain cell")
        timed_out = any(o.get("ename") == engine.TIMEOUT for o in cell.get("outputs", []))
        if mark.get("output_cut"):
            notes.append(f"{label} printed more than the grader keeps: its output was cut")
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if output.ename == engine.TIMEOUT:
                notes.append(f"{label} timed out after {timeout} s and was interrupted")
            elif output.ename in (engine.KERNEL_DIED, engine.KERNEL_UNRESPONSIVE):
                notes.append(f"{label}: {output.evalue}")
            elif output.ename == engine.NOT_RUN:
                notes.append(f"{label}: {output.evalue}")
                break
            elif not meta.get("grade") and not (timed_out and output.ename == "KeyboardInterrupt"):
                errors.append(f"{label} raised {output.ename}")
        if not meta.get("grade") and not meta.get("locked"):
            for pattern, what in SUSPICIOUS.items():
                if re.search(pattern, cell.source, flags=re.M):
                    suspicious.append(f"{label} {what}")
    return list(dict.fromkeys(notes)), errors, suspicious


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


def grade_in(scratch: Path, job: dict, settings: dict, result: Result) -> None:
    """Autograde, read back, verify, correct, write feedback: everything for one job."""
    student, assignment = job["student"], job["assignment"]
    clock = time.monotonic()
    root = prepare_course(job, scratch)
    records, runtime = prepare_kernel_env(settings, scratch)
    options = engine.GradingOptions(timeout=settings["timeout"], kernel_name=settings["kernel"],
                                    max_output_chars=settings["max_output_chars"])
    source = root / "solutions" / assignment
    prepared = time.monotonic() - clock
    run = engine.run_autograde(root, assignment, student, options, source)
    clock = time.monotonic()
    if runtime.parent != scratch:
        shutil.rmtree(runtime, ignore_errors=True)
    grades = read_back(result, run, root)
    if grades is None:
        return
    examine(result, run, records, settings["timeout"])
    conclude(result, run)
    verified = time.monotonic() - clock
    if run.ok:
        write_feedback(result, run, grades, options, source)
    clock = time.monotonic()
    publish(result, run, Path(settings["out"]))
    result.timings = {k: round(v, 2) for k, v in {
        "prepare": prepared, **run.timings, "verify": verified,
        "publish": time.monotonic() - clock}.items()}


def read_back(result: Result, run: engine.NbgraderRun, root: Path
              ) -> engine.GradebookGrades | None:
    """Points, lateness from the scratch gradebook; None when nbgrader saved nothing."""
    try:
        grades = engine.read_grades(root, result.assignment, result.student_id)
    except Exception as error:  # noqa: BLE001 - nbgrader stopped before saving a submission
        if run.ok:
            raise
        result.status = ERROR
        result.reason = f"nbgrader could not grade this notebook: {run.log or error}"
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


def examine(result: Result, run: engine.NbgraderRun, records: Path, timeout: int) -> None:
    """Integrity records (verified here, a process that never ran learner code) and what
    happened in the notebook's cells; fixes points and collects flags and notes."""
    verdicts, problems = check_records(records)
    result.flags.extend(problems)
    first = next(iter(verdicts.values()), {})
    result.device, result.torch = first.get("device", ""), first.get("torch", "")
    apply_integrity(result, list(result.max_points), verdicts)
    errors = []
    for path in sorted(run.autograded(result.student_id, result.assignment).glob("*.ipynb")):
        notes, cell_errors, suspicious = describe_cells(path, timeout)
        result.notes.extend(notes)
        errors.extend(cell_errors)
        result.flags.extend(f"review: {s}" for s in suspicious)
    if errors:
        result.notes.append(f"errors outside the test cells: {', '.join(errors[:3])}"
                            + (f" and {len(errors) - 3} more" if len(errors) > 3 else ""))
    result.score = sum(result.points.values())
    result.max_score = sum(result.max_points.values())


def write_feedback(result: Result, run: engine.NbgraderRun, grades: engine.GradebookGrades,
                   options: engine.GradingOptions, source: Path) -> None:
    """Save corrected points as nbgrader manual scores, then nbgrader generate_feedback."""
    by_exercise = {exercise_name(g): g for g in grades.points}
    corrected = {by_exercise[e]: p for e, p in result.points.items()
                 if p != float(grades.points[by_exercise[e]] or 0)}
    if corrected:
        engine.override_scores(run.root, result.assignment, result.student_id, corrected)
    engine.run_feedback(run, result.assignment, result.student_id, options, source)
    if not run.feedback_ok:
        result.notes.append(f"no feedback page: {run.log}")
        conclude(result, run)


def conclude(result: Result, run: engine.NbgraderRun) -> None:
    """Status and short reason from everything gathered."""
    died = [n for n in result.notes if "kernel died" in n or "kernel ignored" in n
            or "not run" in n or "stopped answering" in n]
    if not run.ok:
        result.status = ERROR
        result.notes.insert(0, f"nbgrader could not grade this notebook: {run.log}")
    elif died:
        result.status = ERROR
    if result.flags:
        result.status = FLAGGED
    reasons = result.flags + ([result.notes[0]] if not run.ok else []) + \
        [n for n in result.notes if n not in result.flags]
    result.reason = "; ".join(dict.fromkeys(reasons))


def publish(result: Result, run: engine.NbgraderRun, out: Path) -> None:
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
    path = engine.build_template(job["assignment"], Path(job["source"]), dest, job.get("duedate"))
    return {"template": str(path)}


# ---------------------------------------------------------------- main loop


def die_with_parent() -> None:
    """Stop when the process that started this one dies: nobody would read the results,
    and an orphan would keep writing into OUT while a rerun does."""
    import ctypes
    import signal

    from grader.sandbox import PR_SET_PDEATHSIG

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)


def serve(jobs: int, answers: int) -> None:
    """Answer job lines read from fd ``jobs`` with result lines on fd ``answers``."""
    reader = os.fdopen(jobs, "r", encoding="utf-8")
    writer = os.fdopen(answers, "w", encoding="utf-8")

    def answer(payload: dict) -> None:
        writer.write(json.dumps(payload) + "\n")
        writer.flush()

    answer({"ready": True, "pid": os.getpid()})
    settings = json.loads(reader.readline())
    for line in reader:
        job = json.loads(line)
        try:
            if job["type"] == "template":
                reply = build_template(job)
            else:
                reply = {"result": json.loads(grade(job, settings).to_json())}
        except Exception as error:  # noqa: BLE001
            traceback.print_exc()
            reply = {"error": f"{type(error).__name__}: {error}"}
        answer(reply)


def main(argv: list[str] | None = None) -> int:
    """``python -I -m grader.worker [--slots JOBS,ANSWERS;...]``.

    Without ``--slots`` the worker talks over stdin/stdout. With it, this process imports
    nbgrader and torch once, then forks one worker per slot (a fork server: the imports are
    most of a worker's start-up), each with its own pair of pipes, and waits for them. It
    never grades itself, so learner code that kills its kernel's parent stops one worker,
    not all of them.
    """
    argv = sys.argv[1:] if argv is None else argv
    os.dup2(2, 1)  # stray prints (ours, nbgrader's) go to the log, never to a protocol pipe
    sys.stdout = sys.stderr
    die_with_parent()
    if argv[:1] != ["--slots"]:
        import grader.checks  # noqa: F401 - import torch and the checks before the first job

        serve(os.dup(0), os.dup(1))
        return 0
    slots = [tuple(int(fd) for fd in pair.split(",")) for pair in argv[1].split(";")]
    import grader.checks  # noqa: F401
    from grader import integrity  # noqa: F401

    children = []
    for slot in slots:
        pid = os.fork()
        if pid == 0:
            os.setsid()  # its own process group, so it can be stopped alone
            die_with_parent()
            for other in slots:
                if other != slot:
                    for fd in other:
                        os.close(fd)
            try:
                serve(*slot)
            finally:
                os._exit(0)  # never back into the fork loop, nor the parent's exit handlers
        children.append(pid)
    for slot in slots:
        for fd in slot:
            os.close(fd)
    for pid in children:
        os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
