"""Finding what the class handed in, and what cannot be graded (with the reason why).

The input is nbgrader's submitted layout, ``<student>/<assignment>/<notebook>.ipynb``
(plus nbgrader's ``timestamp.txt``), as a folder or as a zip of it. A zip as an LMS
exports it (Canvas: flat files named ``<student>_[late_]<id>_<id>_<notebook>.ipynb``) is
rearranged into that layout. Every student found gets one :class:`Submission` per
assignment of the batch: those that cannot be graded carry a ``problem`` that becomes the
reason of an error row, so nobody is dropped silently.
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
                         r"(?P<file>.+?)(?:-\d+)?\.ipynb$")
#: What a zip's LMS file names said (Canvas's user id, its late marker), per student and
#: assignment, kept beside the unpacked submissions (hidden: no submission file).
LMS_FILE = ".lms.json"


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


def inspect(student: str, assignment: Assignment, folder: Path) -> Submission:
    """A present assignment folder: which files to grade, or the problem."""
    sub = Submission(student, assignment.name, folder, _files(folder))
    notebooks = [f for f in sub.files if f.endswith(".ipynb") and "/" not in f]
    expected = [f"{name}.ipynb" for name in assignment.notebooks]
    if not sub.files:
        sub.problem = f"the folder is empty: expected {', '.join(expected)}"
        return sub
    present = [name for name in expected if name in notebooks]
    if not present:
        others = [f for f in notebooks if f not in expected]
        sub.problem = (f"found {', '.join(others)} instead of {', '.join(expected)}: rename the "
                       "notebook and grade again" if others else
                       f"no {', '.join(expected)} in the folder")
        return sub
    for name in expected:
        if name not in present:
            sub.notes.append(f"{name} is missing: its exercises get 0 points")
    problems = [p for p in (_notebook_problem(folder / name) for name in present) if p]
    if problems:
        sub.problem = "; ".join(problems)
        return sub
    if "timestamp.txt" in sub.files:
        try:
            parse_timestamp((folder / "timestamp.txt").read_text(errors="replace"))
        except (ValueError, OverflowError):
            sub.files.remove("timestamp.txt")
            sub.notes.append("timestamp.txt could not be read: lateness unknown")
    return sub


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
                found[(student, child.name)] = inspect(student, assignments[child.name], child)
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


def extract_zip(archive: Path, dest: Path, assignments: dict[str, Assignment]) -> Path:
    """Unpack ``archive`` safely into ``dest``; flat LMS exports are put in nbgrader's layout."""
    by_notebook = {nb: a.name for a in assignments.values() for nb in a.notebooks}
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    lms: dict[str, dict[str, str]] = {}
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = Path(info.filename).parts
            if not parts or info.filename.startswith("/") or ".." in parts:
                continue
            if info.is_dir():  # kept: an empty folder is an answer too ("nothing handed in")
                dest.joinpath(*parts).mkdir(parents=True, exist_ok=True)
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symbolic link
                continue
            total += info.file_size
            if total > MAX_ZIP_MB * 1e6:
                raise SubmissionsError(f"{archive} unpacks to more than {MAX_ZIP_MB} MB; unpack "
                                       "it yourself and pass the folder.")
            target = dest.joinpath(*parts)
            match = CANVAS_NAME.match(parts[-1]) if len(parts) == 1 else None
            if match and match["file"] in by_notebook:
                target = dest / match["student"] / by_notebook[match["file"]] / \
                    f"{match['file']}.ipynb"
                lms[f"{match['student']}/{by_notebook[match['file']]}"] = {
                    "lms": "canvas", "user_id": match["user_id"],
                    "submission_id": match["submission_id"], "late": "yes" if match["late"] else "no",
                    "file": parts[-1]}
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
    if lms:
        (dest / LMS_FILE).write_text(json.dumps(lms, indent=1, sort_keys=True))
    return dest


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
