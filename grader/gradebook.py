"""Import a finished autograde run into the course's nbgrader gradebook:
``python -m grader gradebook OUT``.

``python -m grader autograde`` grades in scratch gradebooks of its own and keeps the
results in ``OUT`` (``results/*/*.json``, ``grades.csv``, ``autograded/``). This puts them
where nbgrader users look: the course's ``gradebook.db`` (formgrader, ``nbgrader export``),
as nbgrader itself records a graded submission:

* the assignment, its notebooks and cells, from ``solutions/`` by nbgrader's
  ``generate_assignment`` when the gradebook does not have them yet (into a scratch
  release folder: ``notebooks/`` is not touched), with the run's deadline as due date;
* every student, and a submission per graded notebook, with its timestamp;
* each grade cell's ``auto_score`` as nbgrader's autograder computes it from the graded
  notebook (warnings on stderr cost nothing, as in the run), and where the grader's
  integrity checks changed the points, the corrected points as a ``manual_score`` (what
  the run's own feedback pages show), with ``needs_manual_grade`` set so formgrader lists
  it for review;
* the flags and the error reason as the ``auto_comment`` of the affected solution cell
  (formgrader shows it in the cell's comment box), and the graded notebook copied to the
  course's ``autograded/`` folder, where formgrader opens it.

Importing again (after a rerun, a regrade, or twice) brings the gradebook to the same
state: a manual score the import wrote last time follows the new results, while one a
person entered in formgrader (any other value) is kept, and so is every manual comment.
What the import wrote is remembered in a table of its own in the same database
(``course_grader_import``). Submissions that could not be graded (no graded notebook)
create the student only.

One rule for every gradebook the course writes (docs/grading.md, "One rule for rows that are
not a grade yet"): a flagged row, an error row and a student without a graded submission are
no grade until a person reviews them. ``grader export`` leaves their cells empty; here a
flagged or error submission is listed for manual grading (``needs_manual_grade``), and the
course's ``nbgrader export`` (:class:`CourseCsvExport`, set in grader/nbgrader_config.py)
leaves its score empty until a person grades it in formgrader; a student without a
submission is empty there too, where stock nbgrader writes 0.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.plugins import CsvExportPlugin

from grader import late
from grader import results as report
from grader.autograde.host.out_folder import EXCHANGE_FILES
from grader.errors import GradebookError
from grader.paths import CourseLayout, course_id, course_root, nbgrader_config, with_python_tools
from grader.results import ERROR, exercise_name

LEDGER = "course_grader_import"
PREFIX = "course-grader: "


@dataclass
class ImportSummary:
    """What one import changed."""

    db_url: str
    students_added: list[str] = field(default_factory=list)
    assignments_added: list[str] = field(default_factory=list)
    submissions_added: int = 0
    submissions_updated: int = 0
    unchanged: int = 0
    corrections: int = 0  # grades holding the grader's corrected points
    kept_manual: list[str] = field(default_factory=list)
    not_graded: list[str] = field(default_factory=list)
    penalties: int = 0  # submissions with a late penalty
    feedback_placed: int = 0
    feedback_not_placed: list[str] = field(default_factory=list)
    files: str = ""  # the folder of autograded/ and feedback/ for this gradebook
    absent: list[str] = field(default_factory=list)  # rows kept from an earlier batch that lacked them

    def text(self) -> str:
        lines = [f"Imported into {self.db_url}: {self.submissions_added} new, "
                 f"{self.submissions_updated} updated, {self.unchanged} unchanged submission(s); "
                 f"{self.corrections} grade(s) hold the grader's integrity corrections as manual scores."]
        if self.assignments_added:
            lines.append("assignments added from solutions/: " + ", ".join(self.assignments_added))
        if self.students_added:
            lines.append(f"{len(self.students_added)} student(s) added")
        if self.penalties:
            lines.append(f"{self.penalties} submission(s) with a late penalty")
        lines.append(f"feedback placed for `nbgrader release_feedback` in {self.files}/feedback: "
                     f"{self.feedback_placed} submission(s)")
        if self.feedback_not_placed:
            lines.append(f"feedback not placed for {len(self.feedback_not_placed)} submission(s) with "
                         "no submission_secret.txt (not submitted through nbgrader's exchange; "
                         "send them the zips of `python -m grader feedback OUT` instead): "
                         + ", ".join(self.feedback_not_placed[:5])
                         + (" ..." if len(self.feedback_not_placed) > 5 else ""))
        if self.absent:
            lines.append(f"NOT IN THE LATEST BATCH, imported with the grade of an earlier one "
                         f"({len(self.absent)}): " + "; ".join(self.absent))
        lines += [f"kept the manual score entered by hand: {k}" for k in self.kept_manual]
        lines += [f"no submission recorded for {k}" for k in self.not_graded]
        return "\n".join(lines)


# ---------------------------------------------------------------- reading OUT


def read_run(out: Path) -> tuple[dict, list[report.Result]]:
    """The manifest and every result of a whole (unsharded or merged) autograde run."""
    path = out / "manifest.json"
    if not path.is_file():
        raise GradebookError(f"{out} has no manifest.json: pass the --out folder of a finished "
                             "`python -m grader autograde` run (or of `python -m grader merge`).")
    manifest = json.loads(path.read_text())
    k, n = manifest["shard"]
    if n != 1:
        raise GradebookError(f"{out} holds shard {k}/{n} only: merge the shards first "
                             "(`python -m grader merge OUT-1 ... OUT-N --out GRADED`), then import GRADED.")
    results = report.load_results(out)
    keys = report.run_keys(manifest)
    missing = [f"{s}/{a}" for s, a in keys if (s, a) not in results]
    if missing:
        raise GradebookError(f"No result for {len(missing)} submission(s), e.g. {missing[:3]}: "
                             "rerun the same autograde command (it resumes), then import again.")
    return manifest, [results[key] for key in keys]


def deadline(manifest: dict, assignment: str) -> str | None:
    deadlines = manifest.get("options", {}).get("deadlines") or {}
    return deadlines.get(assignment) or deadlines.get("*")


# ---------------------------------------------------------------- nbgrader


def course_config(root: Path, db_url: str | None):
    """The course's nbgrader configuration, on ``root`` and its gradebook (or ``db_url``)."""
    return nbgrader_config(root, db_url)


def add_assignment(root: Path, config, assignment: str) -> None:
    """Record ``assignment`` in the gradebook as ``nbgrader generate_assignment`` does, writing
    the learner notebooks to a scratch folder (``notebooks/`` stays as it is)."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    source = CourseLayout(root).source(assignment)
    if not source.is_dir():
        raise GradebookError(f"The run graded {assignment}, which is not in {source.parent}: "
                             "import from the course folder the run graded with (COURSE_ROOT).")
    os.environ.update(with_python_tools(dict(os.environ)))
    with tempfile.TemporaryDirectory(prefix="cg-release-") as scratch:
        config = config.copy()
        config.CourseDirectory.release_directory = scratch
        coursedir = CourseDirectory(config=config)
        coursedir.assignment_id = assignment
        try:
            GenerateAssignment(coursedir=coursedir, config=config, force=True).start()
        except (Exception, SystemExit) as error:  # noqa: BLE001 - nbgrader's own errors vary
            raise GradebookError(f"nbgrader could not add {assignment} to the gradebook ({error}): "
                                 f"run `nbgrader generate_assignment {assignment}` to see why.") from None


def check_cells(gb, result: report.Result, notebooks: list[str]) -> None:
    """The gradebook's grade cells must be those the run graded, with the same points."""
    cells = {exercise_name(c.name): c.max_score for nb in notebooks
             for c in gb.find_notebook(nb, result.assignment).grade_cells}
    if cells != result.max_points:
        raise GradebookError(
            f"The gradebook's {result.assignment} has grade cells {cells}, but the run graded "
            f"{result.max_points}: the instructor notebook changed between the two. Regrade with "
            "the current solutions/, or restore the solutions the run used, then import again.")


# ---------------------------------------------------------------- one submission


def stderr_free(cell):
    cell = cell.copy()
    cell["outputs"] = [o for o in cell.get("outputs", [])
                       if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return cell


def auto_scores(path: Path) -> tuple[dict[str, float | None], dict[str, str | None]]:
    """nbgrader's autograder scores of a graded notebook's grade cells (stderr ignored, as in
    the run), and its automatic comments of the solution cells ("No response.")."""
    import nbformat
    from nbgrader import utils

    scores, comments = {}, {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if utils.is_grade(cell):
            scores[meta["grade_id"]] = utils.determine_grade(stderr_free(cell))[0]
        if utils.is_solution(cell):
            unchanged = meta.get("checksum") == utils.compute_checksum(cell)
            comments[meta["grade_id"]] = "No response." if unchanged else None
    return scores, comments


def notes_by_cell(result: report.Result, solution_cells: list[str]) -> dict[str, str]:
    """The grader's flags as comments: on the exercise they name, else on the first cell."""
    notes: dict[str, list[str]] = {}
    for flag in result.flags:
        name = flag.split(":", 1)[0]
        cell = name if name in solution_cells else solution_cells[0]
        notes.setdefault(cell, []).append(f"flagged: {flag}")
    if result.status == ERROR and result.reason:
        notes.setdefault(solution_cells[0], []).append(f"error: {result.reason}")
    return {cell: PREFIX + "\n".join(lines) for cell, lines in notes.items()}


class Ledger:
    """What the import last wrote to each grade (table ``course_grader_import``)."""

    def __init__(self, gb):
        from sqlalchemy import text

        self.gb, self.text = gb, text
        gb.db.execute(text(f"CREATE TABLE IF NOT EXISTS {LEDGER} "
                           "(grade_id VARCHAR(32) PRIMARY KEY, state TEXT NOT NULL)"))

    def get(self, grade_id: str) -> dict | None:
        row = self.gb.db.execute(self.text(f"SELECT state FROM {LEDGER} WHERE grade_id = :g"),
                                 {"g": grade_id}).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, grade_id: str, state: dict) -> None:
        self.gb.db.execute(self.text(f"INSERT OR REPLACE INTO {LEDGER} (grade_id, state) VALUES (:g, :s)"),
                           {"g": grade_id, "s": json.dumps(state, sort_keys=True)})


def import_grade(grade, auto: float | None, corrected: float | None, flagged: bool,
                 ledger: Ledger, where: str, summary: ImportSummary) -> bool:
    """One grade cell: the autograder's score, the grader's correction as a manual score
    unless a person entered one, the review flag when there is news. True if it changed."""
    correction = corrected if corrected is not None and corrected != (auto or 0) else None
    news = {"auto": auto, "correction": correction, "flagged": flagged}
    before = ledger.get(grade.id) or {}
    wrote = before.get("wrote")
    ours = grade.manual_score is None or grade.manual_score == wrote
    changed = grade.auto_score != auto
    grade.auto_score = auto
    if ours:
        changed |= grade.manual_score != correction
        grade.manual_score = wrote = correction
    elif correction is not None and grade.manual_score != correction:
        summary.kept_manual.append(f"{where}: {grade.manual_score:g} (the grader says {correction:g})")
    if correction is not None and grade.manual_score == correction:
        summary.corrections += 1
    if news != before.get("news"):  # new to a person: listed for review in formgrader
        review = auto is None or correction is not None or flagged
        changed |= grade.needs_manual_grade != review
        grade.needs_manual_grade = review
    if before != {"news": news, "wrote": wrote}:
        ledger.put(grade.id, {"news": news, "wrote": wrote})
    return changed


def place_feedback(files: Path, out: Path, result: report.Result, summary: ImportSummary) -> bool:
    """The run's feedback pages of one submission where ``nbgrader release_feedback`` looks
    for them (``feedback/<student>/<assignment>/`` with timestamp.txt and the submission's
    secret); True if anything changed. Only a submission made through nbgrader's exchange
    has the secret its learner fetches the feedback with."""
    source = out / "feedback" / result.student_id / result.assignment
    if not any(source.glob("*.html")):
        return False
    if not all((source / name).is_file() for name in EXCHANGE_FILES):
        summary.feedback_not_placed.append(f"{result.student_id}/{result.assignment}")
        return False
    target = files / "feedback" / result.student_id / result.assignment
    changed = False
    for path in [*sorted(source.glob("*.html")), *(source / n for n in EXCHANGE_FILES)]:
        dest = target / path.name
        if not dest.is_file() or dest.read_bytes() != path.read_bytes():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
            changed = True
    summary.feedback_placed += 1
    return changed


def import_penalty(submission, policy: late.Policy, student: str) -> bool:
    """Each notebook's late penalty, as nbgrader's AssignLatePenalties sets it (the course's
    plugin, on the notebook's score and the submission's seconds late); True if changed."""
    changed = False
    for notebook in submission.notebooks:
        taken = late.penalty(policy, student, notebook.score, submission.total_seconds_late or 0)
        value = taken or None
        changed |= notebook.late_submission_penalty != value
        notebook.late_submission_penalty = value
    return changed


def import_submission(gb, ledger: Ledger, files: Path, out: Path, result: report.Result,
                      summary: ImportSummary, policy: late.Policy | None = None) -> None:
    student, assignment = result.student_id, result.assignment
    graded = sorted((out / "autograded" / student / assignment).glob("*.ipynb"))
    notebooks = [nb.name for nb in gb.find_assignment(assignment).notebooks]
    if not graded or not result.max_points:
        reason = report.short(result.reason, 120)
        summary.not_graded.append(f"{student}/{assignment} ({result.status}: {reason})")
        return
    check_cells(gb, result, notebooks)
    from nbgrader.api import MissingEntry

    try:
        submission = gb.find_submission(assignment, student)
        created = False
    except MissingEntry:
        submission = gb.add_submission(assignment, student)
        created = True
    timestamp = result.submitted_at or None
    from nbgrader.utils import parse_utc

    changed = submission.timestamp != parse_utc(timestamp)
    submission.timestamp = parse_utc(timestamp)
    flagged_exercises = {f.split(":", 1)[0] for f in result.flags}
    # not one exercise's flag, or an error row (a notebook not graded whole): the first cell is listed
    whole = any(name not in result.max_points for name in flagged_exercises) or result.status == ERROR
    for path in graded:
        if path.stem not in notebooks:
            raise GradebookError(f"{path} is not a notebook of {assignment} in the gradebook.")
        scores, auto_comments = auto_scores(path)
        solution_cells = list(auto_comments)
        notes = notes_by_cell(result, solution_cells) if solution_cells else {}
        for number, (grade_id, auto) in enumerate(scores.items()):
            grade = gb.find_grade(grade_id, path.stem, assignment, student)
            exercise = exercise_name(grade_id)
            flagged = exercise in flagged_exercises or (whole and number == 0)  # listed for review
            changed |= import_grade(grade, auto, result.points.get(exercise), flagged,
                                    ledger, f"{student}/{assignment}/{grade_id}", summary)
        for cell, auto_comment in auto_comments.items():
            comment = gb.find_comment(cell, path.stem, assignment, student)
            text = "\n".join(t for t in (auto_comment, notes.get(cell)) if t) or None
            changed |= comment.auto_comment != text
            comment.auto_comment = text
        target = files / "autograded" / student / assignment / path.name
        if not target.is_file() or target.read_bytes() != path.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            changed = True
    gb.db.commit()
    if policy is not None and import_penalty(submission, policy, student):
        changed = True
        gb.db.commit()
    if submission.late_submission_penalty:
        summary.penalties += 1
    changed |= place_feedback(files, out, result, summary)
    if created:
        summary.submissions_added += 1
    elif changed:
        summary.submissions_updated += 1
    else:
        summary.unchanged += 1


# ---------------------------------------------------------------- the command


def files_folder(root: Path, db_url: str | None) -> Path:
    """Where a gradebook's graded notebooks and feedback go: the course folder for the
    course's own gradebook.db, the folder of the database file for another (``--db``), so
    that two gradebooks never share an ``autograded/`` folder."""
    if not db_url or db_url == CourseLayout(root).db_url:
        return root
    if db_url.startswith("sqlite:///"):
        return Path(db_url[len("sqlite:///"):]).resolve().parent
    raise GradebookError(f"--db {db_url}: only SQLite gradebooks (sqlite:///PATH) can be given, "
                         "since their autograded/ and feedback/ folders go beside the file.")


def import_run(out: Path, root: Path | None = None, db_url: str | None = None) -> ImportSummary:
    """Import the autograde output ``out`` into the gradebook of the course at ``root``
    (default: :func:`grader.paths.course_root`; ``db_url`` overrides its gradebook.db, and
    its files then go beside that database: :func:`files_folder`)."""
    from nbgrader.api import Gradebook, MissingEntry

    root = (root or course_root()).resolve()
    manifest, results = read_run(Path(out))
    files = files_folder(root, db_url)
    config = course_config(root, db_url)
    url = config.CourseDirectory.db_url
    summary = ImportSummary(url, files=str(files))
    policy = late.load_policy(root)
    ident = course_id(root)
    os.environ.update(with_python_tools(dict(os.environ)))
    assignments = list(dict.fromkeys(r.assignment for r in results))
    with Gradebook(url, ident) as gb:
        missing = []
        for name in assignments:
            try:
                if not gb.find_assignment(name).notebooks:
                    missing.append(name)
            except MissingEntry:
                missing.append(name)
    for name in missing:
        add_assignment(root, config, name)
        summary.assignments_added.append(name)
    with Gradebook(url, ident) as gb:
        for name in assignments:
            record = gb.find_assignment(name)
            due = deadline(manifest, name)
            if record.duedate is None and due:
                gb.update_or_create_assignment(name, duedate=due)
        known = {s.id for s in gb.students}
        ledger = Ledger(gb)
        for result in results:
            if result.student_id not in known:
                gb.add_student(result.student_id)
                known.add(result.student_id)
                summary.students_added.append(result.student_id)
            import_submission(gb, ledger, files, Path(out), result, summary, policy)
            if result.missing_from:
                summary.absent.append(result.kept_note)
        gb.db.commit()
    return summary



# ---------------------------------------------------------------- nbgrader export


class CourseCsvExport(CsvExportPlugin):
    """``nbgrader export`` by the course's rule (that of ``grader export``): a submission that
    is not a grade yet gets empty score cells, where stock nbgrader writes its points or 0:
    none recorded (nothing could be graded, or nothing handed in), or one still listed for
    manual grading (flagged and error rows the import listed, until a person grades them in
    formgrader)."""

    def export(self, gradebook) -> None:
        from nbgrader.api import MissingEntry

        super().export(gradebook)
        path = Path(self.to or "grades.csv")
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            head, rows = reader.fieldnames, list(reader)
        for row in rows:
            try:
                submission = gradebook.find_submission(row["assignment"], row["student_id"])
                pending = submission.needs_manual_grade
            except MissingEntry:
                pending = True
            if pending:
                row.update(raw_score="", late_submission_penalty="", score="")
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, head, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
