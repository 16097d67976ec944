"""Finding what the class handed in, and what cannot be graded (with the reason why).

The input is nbgrader's submitted layout, ``<student>/<assignment>/<notebook>.ipynb``
(plus nbgrader's ``timestamp.txt``), as a folder or as a zip of it. A zip as an LMS
exports it is rearranged into that layout, one student folder per LMS identity (the LMS's
id, never the display name alone: two John Smiths are two students): Canvas's flat files
``<name>_[late_]<user id>_<submission id>_<file>``, Moodle's folders
``<Full Name>_<participant id>_assignsubmission_file_/<file>``. Every student found gets one
:class:`Submission` per assignment of the batch: those that cannot be graded carry a
``problem`` that becomes the reason of an error row; a notebook under another name (one
``.ipynb`` is unambiguous), a second notebook, or another assignment's notebook is graded and
flagged for review (``review``); a file of a zip that belongs to no student is listed
(:func:`read_unplaced`). Nothing is dropped silently.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

# nbformat -> jsonschema imports rfc3987_syntax when it is installed, and that module builds
# a parser at import time (about 3 s, in every grading process). nbformat's schema never
# checks the formats it serves, so the grader's processes go without it.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402

from grader.errors import SubmissionsError, UsageError  # noqa: E402
from grader.paths import assignment_folders  # noqa: E402
from grader.results import NO_SUBMISSION, exercise_name  # noqa: E402

IGNORED = {".ipynb_checkpoints", "__MACOSX", "__pycache__", ".DS_Store"}
MAX_NOTEBOOK_MB = 50
MAX_ZIP_MB = 4096
CANVAS_NAME = re.compile(r"^(?P<student>[^_/]+)_(?P<late>late_)?(?P<user_id>\d+)_(?P<submission_id>\d+)_"
                         r"(?P<file>.+?)$")
#: Canvas numbers a resubmitted file: ``self_attention-1.ipynb``.
CANVAS_RESUBMISSION = re.compile(r"-\d+$")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<participant_id>\d+)_assignsubmission_[a-z]+_?$")
#: What a zip's LMS file names said (Canvas's user id, its late marker, Moodle's participant id,
#: the display name), per student and assignment, kept beside the unpacked submissions.
LMS_FILE = ".lms.json"
#: The zip's files that belong to no student's submission, each with why (listed by the run).
UNPLACED_FILE = ".unplaced.json"


@dataclass(frozen=True)
class Assignment:
    """An assignment of the course, read from its instructor notebook(s)."""

    name: str
    source: Path
    notebooks: tuple[str, ...]  # notebook names without .ipynb
    exercises: tuple[tuple[str, float], ...]  # (exercise, points) in notebook order


def read_assignment(folder: Path) -> Assignment:
    notebooks, exercises = [], []
    for path in sorted(folder.glob("*.ipynb")):
        notebooks.append(path.stem)
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                exercises.append((exercise_name(meta["grade_id"]), float(meta.get("points", 0))))
    return Assignment(folder.name, folder, tuple(notebooks), tuple(exercises))


def course_assignments(solutions: Path) -> dict[str, Assignment]:
    """Every assignment in ``solutions/`` (folders holding a notebook), by name, in order."""
    return {folder.name: read_assignment(folder) for folder in assignment_folders(solutions)}


@dataclass
class Submission:
    """One student's folder for one assignment; ``problem`` says why it cannot be graded."""

    student: str
    assignment: str
    folder: Path | None = None
    files: list[str] = field(default_factory=list)  # relative to folder, to grade
    problem: str = ""
    notes: list[str] = field(default_factory=list)
    submitted: bool = True  # False: no folder for the assignment (``problem`` says so)
    review: list[str] = field(default_factory=list)  # graded, and flagged for a person to look at
    placed_as: dict[str, str] = field(default_factory=dict)  # a renamed notebook: file -> graded as

    @property
    def key(self) -> tuple[str, str]:
        return self.student, self.assignment


# ---------------------------------------------------------------- timestamps


def parse_timestamp(text: str) -> datetime:
    """nbgrader's timestamp.txt format (``2026-11-29 08:00:00.000000 UTC`` or ISO), as UTC."""
    from dateutil import parser, tz

    parts = text.strip().split(" ")
    if len(parts) == 3:
        zone = parts[2]
        zone = tz.tzoffset(None, int(zone)) if zone.lstrip("+-").isdigit() else tz.gettz(zone)
        stamp = parser.parse(" ".join(parts[:2])).replace(tzinfo=zone)
    else:
        stamp = parser.parse(text.strip())
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.astimezone(timezone.utc)


# ---------------------------------------------------------------- reading folders


def _visible(path: Path) -> bool:
    return path.name not in IGNORED and not path.name.startswith(".")


def _files(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and all(_visible(Path(p)) for p in relative.parts):
            found.append(str(relative))
    return found


def _notebook_problem(path: Path) -> str:
    """Why a notebook file cannot be graded, or ''."""
    size_mb = path.stat().st_size / 1e6
    if size_mb > MAX_NOTEBOOK_MB:
        return (f"{path.name} is {size_mb:.0f} MB (limit {MAX_NOTEBOOK_MB} MB): ask the student "
                "to clear the outputs and resubmit")
    try:
        nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is the submission's
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return (f"{path.name} is not a valid notebook ({short_error(first)}): ask the student "
                "for a fresh copy (File > Download in Jupyter)")
    return ""


def short_error(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def inspect(student: str, assignment: Assignment, folder: Path,
            others: dict[str, Assignment] | None = None) -> Submission:
    """A present assignment folder: which files to grade (a lone notebook under another name
    graded as the assignment's, flagged), or the problem."""
    sub = Submission(student, assignment.name, folder, _files(folder))
    notebooks = [f for f in sub.files if f.endswith(".ipynb") and "/" not in f]
    expected = [f"{name}.ipynb" for name in assignment.notebooks]
    if not sub.files:
        sub.problem = f"the folder is empty: expected {', '.join(expected)}"
        return sub
    present = [name for name in expected if name in notebooks]
    extra = [f for f in notebooks if f not in expected]
    if not present and len(extra) == 1 and len(expected) == 1:
        sub.placed_as = {extra[0]: expected[0]}
        sub.review.append(f"renamed: {extra[0]} graded as {expected[0]}")
        present, extra = [extra[0]], []
    elif not present:
        sub.problem = (f"found {', '.join(extra)} instead of {', '.join(expected)}: keep the one "
                       f"the student meant, rename it {expected[0]} and grade again" if extra else
                       f"no {', '.join(expected)} in the folder")
        return sub
    if extra:
        sub.review.append(f"also handed in {', '.join(extra)} (not graded): only {', '.join(present)} "
                          "was; check which one the student meant")
    for name in expected:
        if name not in present and name not in sub.placed_as.values():
            sub.notes.append(f"{name} is missing: its exercises get 0 points")
    problems = [p for p in (_notebook_problem(folder / name) for name in present) if p]
    if problems:
        sub.problem = "; ".join(problems)
        return sub
    for name in present:
        owner = _owner(folder / name, assignment, others or {})
        if owner:
            sub.review.append(f"{name} holds the exercises of {owner}, not of {assignment.name}: "
                              f"grade it as {owner} (move it to {student}/{owner}/) if that is what "
                              "the student meant")
    if "timestamp.txt" in sub.files:
        try:
            parse_timestamp((folder / "timestamp.txt").read_text(errors="replace"))
        except (ValueError, OverflowError):
            sub.files.remove("timestamp.txt")
            sub.notes.append("timestamp.txt could not be read: lateness unknown")
    return sub


def _owner(path: Path, assignment: Assignment, others: dict[str, Assignment]) -> str:
    """The other assignment whose graded cells ``path`` holds, when it holds none of its own."""
    ids = {exercise_name(c.metadata.get("nbgrader", {}).get("grade_id", ""))
           for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")}
    if not ids or ids & {name for name, _ in assignment.exercises}:
        return ""
    return next((a.name for a in others.values() if ids & {name for name, _ in a.exercises}), "")


def _student_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and _visible(p))


def find_root(root: Path, known: set[str]) -> Path:
    """The folder whose children are students (a zip often wraps them in one more folder)."""
    current = root
    for _ in range(3):
        children = _student_dirs(current)
        has_assignments = any(c.name in known for s in children for c in s.iterdir() if c.is_dir())
        if has_assignments or len(children) != 1:
            return current
        current = children[0]
    return root


def discover(root: Path, assignments: dict[str, Assignment],
             only: list[str] | None = None) -> list[Submission]:
    """One Submission per student and assignment of the batch, sorted."""
    root = find_root(root, set(assignments))
    by_notebook = {nb: a for a in assignments.values() for nb in a.notebooks}
    found: dict[tuple[str, str], Submission] = {}
    students = []
    for student_dir in _student_dirs(root):
        student = student_dir.name
        students.append(student)
        for child in sorted(student_dir.iterdir()):
            if not _visible(child):
                continue
            if child.is_dir() and child.name in assignments:
                found[(student, child.name)] = inspect(student, assignments[child.name], child, assignments)
            elif child.is_dir():
                found[(student, child.name)] = Submission(
                    student, child.name, child, problem=f"unknown assignment folder "
                    f"'{child.name}': expected one of {', '.join(assignments)}")
            elif child.suffix == ".ipynb" and child.stem in by_notebook:
                name = by_notebook[child.stem].name
                found.setdefault((student, name), Submission(
                    student, name, problem=f"{child.name} is not inside its assignment folder: "
                    f"move it to {student}/{name}/{child.name}"))
    batch = only or sorted({a for (_, a) in found if a in assignments})
    for name in batch:
        if name not in assignments:
            raise UsageError(f"No assignment {name!r} in solutions/; choose from "
                             f"{', '.join(assignments)}.")
    for student in students:
        for name in batch:
            if (student, name) not in found:
                empty = not any(_visible(p) for p in (root / student).iterdir())
                found[(student, name)] = Submission(
                    student, name, submitted=False,
                    problem=NO_SUBMISSION + (" (the student's folder is empty)" if empty else ""))
    subs = [s for s in found.values() if only is None or s.assignment in only]
    return sorted(subs, key=lambda s: s.key)


# ---------------------------------------------------------------- zips


def lms_student(name: str, lms_id: str) -> str:
    """The folder of an LMS identity: the display name, readable, and the LMS's id, unique."""
    return f"{re.sub(r'[^a-z0-9]+', '', name.lower()) or 'student'}-{lms_id}"


def _lms_entry(parts: tuple[str, ...]) -> tuple[str, dict[str, str], str] | None:
    """(student folder, what the LMS said, file name) of a zip member an LMS named, else None."""
    canvas = CANVAS_NAME.match(parts[-1]) if len(parts) == 1 else None
    if canvas:
        file = canvas["file"]
        stem, suffix = (file[:-len(".ipynb")], ".ipynb") if file.endswith(".ipynb") else (file, "")
        file = CANVAS_RESUBMISSION.sub("", stem) + suffix
        return lms_student(canvas["student"], canvas["user_id"]), {
            "lms": "canvas", "user_id": canvas["user_id"], "submission_id": canvas["submission_id"],
            "late": "yes" if canvas["late"] else "no", "name": canvas["student"], "file": parts[-1]}, file
    moodle = next((MOODLE_FOLDER.match(p) for p in parts[:2] if MOODLE_FOLDER.match(p)), None)
    if moodle and parts[-1] != moodle.string:
        return lms_student(moodle["name"], moodle["participant_id"]), {
            "lms": "moodle", "participant_id": moodle["participant_id"], "name": moodle["name"],
            "file": "/".join(parts)}, parts[-1]
    return None


def _members(zf: zipfile.ZipFile, archive: Path) -> list[tuple[zipfile.ZipInfo, tuple[str, ...]]]:
    """The zip's safe members (no absolute path, no '..', no link), within the size limit."""
    total, members = 0, []
    for info in zf.infolist():
        parts = Path(info.filename).parts
        if not parts or info.filename.startswith("/") or ".." in parts:
            continue
        if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link
            continue
        total += info.file_size
        if total > MAX_ZIP_MB * 1e6:
            raise SubmissionsError(f"{archive} unpacks to more than {MAX_ZIP_MB} MB; unpack "
                                   "it yourself and pass the folder.")
        members.append((info, parts))
    return members


def extract_zip(archive: Path, dest: Path, assignments: dict[str, Assignment],
                only: list[str] | None = None) -> Path:
    """Unpack ``archive`` safely into ``dest``; LMS exports are put in nbgrader's layout.

    An LMS file goes to its student's folder for the assignment its notebook names; a student's
    notebook under another name goes to the batch's assignment (``only``'s one, or the one every
    recognised notebook of the zip belongs to), where :func:`inspect` grades it and flags it. A
    file that belongs to no student (or to no assignment that can be told) is listed in
    :data:`UNPLACED_FILE` with what to do."""
    by_notebook = {nb: a.name for a in assignments.values() for nb in a.notebooks}
    dest.mkdir(parents=True, exist_ok=True)
    lms: dict[str, dict[str, str]] = {}
    unplaced: dict[str, str] = {}
    with zipfile.ZipFile(archive) as zf:
        members = _members(zf, archive)
        named = [(info, parts, _lms_entry(parts)) for info, parts in members if not info.is_dir()]
        known = {by_notebook[Path(e[2]).stem] for _, _, e in named
                 if e and e[2].endswith(".ipynb") and Path(e[2]).stem in by_notebook}
        batch = only[0] if only and len(only) == 1 else (known.pop() if len(known) == 1 else None)
        for info, parts in members:  # kept: an empty folder is an answer too ("nothing handed in")
            moodle = next((MOODLE_FOLDER.match(p) for p in parts[:2] if MOODLE_FOLDER.match(p)), None)
            if info.is_dir() and moodle:  # a participant's folder: the student, files or none
                dest.joinpath(lms_student(moodle["name"], moodle["participant_id"])).mkdir(exist_ok=True)
            elif info.is_dir():
                dest.joinpath(*parts).mkdir(parents=True, exist_ok=True)
        for info, parts, entry in named:
            if any(p in IGNORED or p.startswith(".") for p in parts):  # the archiver's, not a student's
                unplaced[info.filename] = ("the archiver's or Jupyter's own file (__MACOSX/, .DS_Store, "
                                           "checkpoints, hidden files), not graded: look only if a "
                                           "student says her work is in it")
                continue
            if entry is None:
                if len(parts) == 1:
                    unplaced[info.filename] = ("neither <student>/<assignment>/<notebook> nor an LMS file "
                                               "name: put it in its student's folder and grade again")
                    continue
                target = dest.joinpath(*parts)
            else:
                student, said, file = entry
                stem = Path(file).stem
                assignment = by_notebook.get(stem) if file.endswith(".ipynb") else None
                assignment = assignment if assignment and (not only or assignment in only) else batch
                if assignment is None:
                    unplaced[info.filename] = (f"{student}'s {file}: no assignment could be told from the "
                                               "zip; grade it with --assignment NAME")
                    continue
                target = dest / student / assignment / file
                lms.setdefault(f"{student}/{assignment}", said)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    if lms:
        (dest / LMS_FILE).write_text(json.dumps(lms, indent=1, sort_keys=True))
    if unplaced:
        (dest / UNPLACED_FILE).write_text(json.dumps(unplaced, indent=1, sort_keys=True))
    return dest


def read_unplaced(root: Path) -> dict[str, str]:
    """What :func:`extract_zip` could not place: file -> why and what to do."""
    path = root / UNPLACED_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def read_lms(root: Path) -> dict[tuple[str, str], dict[str, str]]:
    """What :func:`extract_zip` kept of the LMS's file names, by (student, assignment)."""
    path = root / LMS_FILE
    if not path.is_file():
        return {}
    return {tuple(key.split("/", 1)): value for key, value in json.loads(path.read_text()).items()}


# ---------------------------------------------------------------- sharding


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4), checked."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard expects K/N with 1 <= K <= N (for example 1/4); got {text!r}.")
    return int(match[1]), int(match[2])


def shard(subs: list[Submission], k: int, n: int) -> list[Submission]:
    """The K-th of N deterministic slices of the sorted submissions (round robin)."""
    ordered = sorted(subs, key=lambda s: s.key)
    return [s for i, s in enumerate(ordered) if i % n == k - 1]
