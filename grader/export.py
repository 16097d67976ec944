"""Grades and feedback out to an LMS: ``python -m grader export OUT --lms canvas|moodle``
and ``python -m grader feedback OUT``.

The grades are grades.csv's ``score`` (after the late penalty) of the run in OUT (or of several
runs: ``export graded/10.1 graded/10.2``), one column per assignment, in the layout each LMS's
gradebook import reads. Runs that graded one assignment with different late settings are
refused, not mixed:

* **Canvas** (Grades > Import): the columns of Canvas's own gradebook export, ``Student,
  ID, SIS User ID, SIS Login ID, Section``, a ``Points Possible`` row, then one column per
  assignment. Canvas matches a row by ``ID``, its numeric user id, which a Canvas
  submissions zip carries in every file name: a class graded from such a zip needs no
  roster. A new column name makes a new assignment in Canvas; to fill an existing one,
  give its Canvas id (``--canvas-assignment-id 12345``, the number in the assignment's
  address): the column is then named ``10.1-self-attention (12345)``, as Canvas's export
  names its columns, and Canvas matches it by the id.
* **Moodle** (Grades > Import > CSV file): ``First name, Last name, ID number, Email
  address``, then one column per assignment; at import, map ``Email address`` to
  ``useremail`` (or ``ID number`` to ``useridnumber``) and each assignment column to its
  grade item. Moodle needs a roster (``--roster``) for the e-mail addresses.

The roster is a CSV with a header: ``student_id`` (the name of the student's submission
folder, or the name part of a Canvas file) and any of ``name``, ``canvas_id``,
``sis_user_id``, ``sis_login_id``, ``section``, ``first_name``, ``last_name``, ``email``,
``id_number``; instead of ``student_id`` a row may give ``participant_id`` (Moodle's; its
grading worksheet's ``Identifier``, ``Participant 116``), matched to the participant id of
the Moodle zip the class was graded from. Nobody is dropped silently: a graded student
missing from the roster, a roster row without a submission, a flagged row (left empty
unless ``--include-flagged``), a row the grader failed on (left empty until a rerun grades
it), a row kept from an earlier batch that lacked its student (exported) and the files of
``OUT/not-graded.csv`` are each listed in what the command prints, and the rows without a
grade are written with an empty cell.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from grader import late
from grader.autograde.host.out_folder import NOT_GRADED, read_not_graded
from grader.errors import ExportError
from grader.gradebook import read_run
from grader.results import ERROR, FLAGGED, Result, atomic_write, number

LMS = ("canvas", "moodle")
ROSTER_FIELDS = ("student_id", "name", "canvas_id", "sis_user_id", "sis_login_id", "section",
                 "first_name", "last_name", "email", "id_number")
CANVAS_HEAD = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_HEAD = ["First name", "Last name", "ID number", "Email address"]


@dataclass
class ExportSummary:
    """What an export wrote and every row it could not fill."""

    path: Path
    rows: int = 0
    not_in_roster: list[str] = field(default_factory=list)  # graded, not exported
    no_submission: list[str] = field(default_factory=list)  # roster rows with no result
    flagged: list[str] = field(default_factory=list)  # left empty (or exported, if asked)
    retry: list[str] = field(default_factory=list)  # the grader's failure: left empty
    ungradable: list[str] = field(default_factory=list)  # no gradable submission: left empty, with why
    absent: list[str] = field(default_factory=list)  # kept from an earlier batch: exported, said
    not_graded: list[str] = field(default_factory=list)  # OUT/not-graded.csv files that list something
    included_flagged: bool = False

    def text(self) -> str:
        lines = [f"wrote {self.path}: {self.rows} student(s)"]
        if self.not_in_roster:
            lines.append(f"NOT EXPORTED, not in the roster ({len(self.not_in_roster)}): "
                         + ", ".join(self.not_in_roster) + " — add them to the roster and export again")
        if self.no_submission:
            lines.append(f"in the roster, no result in this run, left empty ({len(self.no_submission)}): "
                         + ", ".join(self.no_submission))
        if self.flagged:
            what = "exported as graded" if self.included_flagged else \
                "left empty: review them (report.html), then --include-flagged"
            lines.append(f"flagged, {what} ({len(self.flagged)}): " + ", ".join(self.flagged))
        if self.retry:
            lines.append(f"the grader failed, left empty until a rerun grades them ({len(self.retry)}): "
                         + ", ".join(self.retry))
        if self.ungradable:
            lines.append(f"not gradable, left empty ({len(self.ungradable)}): " + "; ".join(self.ungradable))
        if self.absent:
            lines.append(f"NOT IN THE LATEST BATCH, exported with the grade of an earlier one "
                         f"({len(self.absent)}): " + "; ".join(self.absent)
                         + " — check whether they withdrew or the download missed them")
        lines += [f"NOT GRADED: {what}" for what in self.not_graded]
        return "\n".join(lines)


#: Other names of the roster's columns: Moodle's grading worksheet (``Identifier``:
#: ``Participant 116``, ``Full name``, ``Email address``) serves as a roster as it is.
ROSTER_ALIASES = {"identifier": "participant_id", "full_name": "name", "email_address": "email"}


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """The roster's rows by ``student_id``, or by ``participant N`` for a row that gives Moodle's
    participant id instead (matched to the students by :func:`match_participants`). Header
    names are matched loosely: ``Student ID``, ``Email address``."""
    if not path.is_file():
        raise ExportError(f"No roster at {path}.")
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        names = {h: "_".join(h.strip().lower().replace("-", " ").split()) for h in reader.fieldnames or []}
        names = {h: ROSTER_ALIASES.get(n, n) for h, n in names.items()}
        if not {"student_id", "participant_id"} & set(names.values()):
            raise ExportError(f"{path} has no student_id column (the name of each student's "
                              "submission folder) and no participant_id (Moodle's, or its grading "
                              f"worksheet's Identifier); its columns: {', '.join(names)}.")
        roster = {}
        for row in reader:
            entry = {names[k]: (v or "").strip() for k, v in row.items() if k in names}
            pid = re.sub(r"^participant\s*", "", entry.get("participant_id", ""), flags=re.I)
            entry["participant_id"] = pid
            key = entry.get("student_id") or (f"participant {pid}" if pid else "")
            if key:
                roster[key] = entry
    return roster


def match_participants(roster: dict[str, dict[str, str]],
                       by_student: dict[str, dict[str, Result]]) -> dict[str, dict[str, str]]:
    """The roster with each row that gives a participant id (and no student_id) keyed by the
    student whose Moodle folder carried that id (``John Smith_116_...``): the display name,
    its letters or its spelling play no part."""
    owner = {r.lms["participant_id"]: student for student, rows in by_student.items()
             for r in rows.values() if r.lms.get("participant_id")}
    matched = {}
    for key, entry in roster.items():
        if not entry.get("student_id") and entry["participant_id"] in owner:
            key = owner[entry["participant_id"]]
        matched[key] = entry
    return matched


def grade_cell(result: Result, include_flagged: bool) -> str:
    """The LMS's cell: empty for a row that is not a grade yet (the grader's failure, a flagged
    row until reviewed, a submission that could not be graded: missing, misnamed, unreadable)."""
    if result.status == ERROR or (result.status == FLAGGED and not include_flagged):
        return ""
    return number(result.final_score)


def read_runs(outs: list[Path]) -> list[Result]:
    """The results of every run in ``outs``; refused when two runs graded one assignment with
    different late settings (deadline, policy, --submitted-at), or disagree on a student."""
    graded: dict[str, list[tuple[Path, dict]]] = {}
    results: dict[tuple[str, str], tuple[Path, Result]] = {}
    for out in outs:
        manifest, rows = read_run(out)
        for name in dict.fromkeys(r.assignment for r in rows):
            graded.setdefault(name, []).append((out, late.settings(manifest, name)))
        for r in rows:
            if r.key in results and (results[r.key][1].final_score, results[r.key][1].status) != \
                    (r.final_score, r.status):
                raise ExportError(f"{results[r.key][0]} and {out} both hold {r.student_id}/{r.assignment}, "
                                  "with different grades: export the run that is right, not both.")
            results.setdefault(r.key, (out, r))
    for name, runs in graded.items():
        policies = {given["policy"] for _, given in runs if given["policy"]}  # older runs: not said
        if len({given["deadline"] for _, given in runs}) > 1 or len(policies) > 1:
            said = "; ".join(f"{out}: {late.describe_settings(given)}" for out, given in runs)
            raise ExportError(f"{name} was graded with different late settings ({said}). Export the "
                              "run whose settings are right alone (the other one's rows of it would "
                              "overwrite its grades in the LMS), or grade the other again with the "
                              f"same --deadline: autograde ... --assignment {name} --deadline ... --force.")
    return [r for _, r in results.values()]


def column_names(assignments: list[str], canvas_ids: dict[str, str]) -> list[str]:
    """Canvas's ``Name (ID)`` for an assignment given an id (Canvas fills that assignment)."""
    unknown = sorted(set(canvas_ids) - set(assignments) - {"*"})
    if unknown or ("*" in canvas_ids and len(assignments) != 1):
        raise ExportError(f"--canvas-assignment-id {', '.join(unknown) or canvas_ids['*']}: "
                          f"give ASSIGNMENT=ID for one of {', '.join(assignments)}.")
    ids = {a: canvas_ids.get(a) or canvas_ids.get("*") for a in assignments}
    return [f"{a} ({ids[a]})" if ids[a] else a for a in assignments]


def export(out: Path | list[Path], lms: str, roster_path: Path | None = None, dest: Path | None = None,
           include_flagged: bool = False, canvas_ids: dict[str, str] | None = None) -> ExportSummary:
    """Write the ``lms`` grade import file of the run(s) in ``out`` (default
    <first OUT>/<lms>-grades.csv); ``canvas_ids``: assignment (or ``*``) -> Canvas's id."""
    if lms not in LMS:
        raise ExportError(f"--lms {lms!r}: choose one of {', '.join(LMS)}.")
    outs = [Path(o) for o in out] if isinstance(out, list) else [Path(out)]
    if canvas_ids and lms != "canvas":
        raise ExportError("--canvas-assignment-id is for --lms canvas; Moodle maps columns at import.")
    results = read_runs(outs)
    out = outs[0]
    roster = read_roster(roster_path) if roster_path else None
    if lms == "moodle" and roster is None:
        raise ExportError("Moodle matches grades by e-mail address or ID number: give "
                          "--roster ROSTER.csv with student_id and email (or id_number) columns.")
    assignments = list(dict.fromkeys(r.assignment for r in sorted(results, key=lambda r: r.key)))
    by_student: dict[str, dict[str, Result]] = {}
    for r in results:
        by_student.setdefault(r.student_id, {})[r.assignment] = r
    summary = ExportSummary(dest or out / f"{lms}-grades.csv", included_flagged=include_flagged)
    students = sorted(by_student)
    if roster is not None:
        roster = match_participants(roster, by_student)
        summary.not_in_roster = [s for s in students if s not in roster]
        summary.no_submission = [s for s in roster if s not in by_student]
        students = list(roster)
    for student in students:
        for r in by_student.get(student, {}).values():
            if r.status == FLAGGED:
                summary.flagged.append(f"{student}/{r.assignment}")
            if r.status == ERROR and r.retry:
                summary.retry.append(f"{student}/{r.assignment}")
            elif r.status == ERROR:
                summary.ungradable.append(f"{student}/{r.assignment} ({r.reason})")
            if r.missing_from:
                summary.absent.append(r.kept_note)
    for one in outs:
        files = read_not_graded(one)
        if files:
            summary.not_graded.append(f"{len(files)} file(s) of the batches belong to no student, "
                                      f"listed in {one / NOT_GRADED}: look whose they are")
    if lms == "canvas":
        missing = [s for s in students if not canvas_id(s, by_student, roster)]
        if missing:
            raise ExportError(f"No Canvas user id for {', '.join(missing[:5])}"
                              f"{' ...' if len(missing) > 5 else ''}: grade the Canvas submissions "
                              "zip (its file names carry the ids), or give --roster with a canvas_id column.")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    maxima = {a: max((r.max_score for r in results if r.assignment == a), default=0.0)
              for a in assignments}
    if lms == "canvas":
        writer.writerow(CANVAS_HEAD + column_names(assignments, canvas_ids or {}))
        writer.writerow(["Points Possible", "", "", "", ""] + [number(maxima[a]) for a in assignments])
    else:
        writer.writerow(MOODLE_HEAD + assignments)
    for student in students:
        own = by_student.get(student, {})
        grades = [grade_cell(own[a], include_flagged) if a in own else "" for a in assignments]
        entry = (roster or {}).get(student, {})
        if lms == "canvas":
            name = entry.get("name") or lms_name(student, by_student)
            writer.writerow([name, canvas_id(student, by_student, roster), entry.get("sis_user_id", ""),
                             entry.get("sis_login_id", ""), entry.get("section", "")] + grades)
        else:
            first, _, last = entry.get("name", "").rpartition(" ")  # a worksheet's Full name
            writer.writerow([entry.get("first_name") or first, entry.get("last_name") or last,
                             entry.get("id_number", ""), entry.get("email", "")] + grades)
        summary.rows += 1
    atomic_write(summary.path, buffer.getvalue())
    return summary


def lms_name(student: str, by_student: dict[str, dict[str, Result]]) -> str:
    """The name the LMS's files gave the student (its folder name when none did)."""
    names = {r.lms.get("name") for r in by_student.get(student, {}).values() if r.lms.get("name")}
    return names.pop() if len(names) == 1 else student


def canvas_id(student: str, by_student: dict[str, dict[str, Result]],
              roster: dict[str, dict[str, str]] | None) -> str:
    """The student's Canvas user id: the roster's, else the one the Canvas zip carried."""
    given = (roster or {}).get(student, {}).get("canvas_id")
    if given:
        return given
    ids = {r.lms.get("user_id") for r in by_student.get(student, {}).values() if r.lms.get("user_id")}
    return ids.pop() if len(ids) == 1 else ""


# ---------------------------------------------------------------- feedback bundles


@dataclass
class Bundles:
    """What ``grader feedback`` wrote, and the rows that have no feedback page to send."""

    folder: Path
    paths: list[Path] = field(default_factory=list)
    no_feedback: list[str] = field(default_factory=list)  # "student/assignment (why)"

    def text(self) -> str:
        lines = [f"wrote {len(self.paths)} feedback bundle(s) in {self.folder}"]
        if self.no_feedback:
            lines.append(f"NO FEEDBACK PAGE, nothing to send ({len(self.no_feedback)}): tell them yourself "
                         "why, or regrade them once fixed: " + "; ".join(self.no_feedback))
        return "\n".join(lines)


def bulk_name(r: Result, page: str) -> str | None:
    """The name of a feedback page in an LMS's bulk upload of feedback files, from the ids the
    LMS's zip gave the submission (None for a submission that did not come from one):
    Canvas: ``<name>_[late_]<user id>_<submission id>_<page>``; Moodle: the participant's
    folder of its download, ``<Full Name>_<participant id>_assignsubmission_file_/<page>``."""
    if r.lms.get("lms") == "canvas":
        late = "late_" if r.lms.get("late") == "yes" else ""
        return f"{r.lms.get('name', r.student_id)}_{late}{r.lms['user_id']}_{r.lms['submission_id']}_{page}"
    if r.lms.get("lms") == "moodle":
        return f"{r.lms['name']}_{r.lms['participant_id']}_assignsubmission_file_/{page}"
    return None


def feedback_bundles(out: Path, dest: Path | None = None) -> Bundles:
    """One zip per student (``<student>.zip``: ``<assignment>/<notebook>.html``) to send or
    upload, and for a class graded from an LMS's zip one ``<lms>-<assignment>.zip`` per
    assignment in the LMS's bulk-upload layout (:func:`bulk_name`: Canvas's submission
    comments, Moodle's "Upload multiple feedback files in a zip"). Rows without a page (a
    submission that could not be graded) are listed."""
    _, results = read_run(out)
    dest = dest or out / "feedback-bundles"
    dest.mkdir(parents=True, exist_ok=True)
    done = Bundles(dest)
    by_student: dict[str, list[Result]] = {}
    for r in sorted(results, key=lambda r: r.key):
        if r.feedback:
            by_student.setdefault(r.student_id, []).append(r)
        else:
            done.no_feedback.append(f"{r.student_id}/{r.assignment} ({r.reason or r.status})")
    for student, rows in by_student.items():
        path = dest / f"{student}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
            for r in rows:
                for page in r.feedback:
                    bundle.write(out / page, f"{r.assignment}/{Path(page).name}")
        done.paths.append(path)
    bulk: dict[tuple[str, str], list[Result]] = {}
    for rows in by_student.values():
        for r in rows:
            if bulk_name(r, "") is not None:
                bulk.setdefault((r.lms["lms"], r.assignment), []).append(r)
    for (lms, assignment), rows in sorted(bulk.items()):
        path = dest / f"{lms}-{assignment}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
            for r in rows:
                for page in r.feedback:
                    bundle.write(out / page, bulk_name(r, Path(page).name))
        done.paths.append(path)
    return done
