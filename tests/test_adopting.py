"""docs/adopting.md, followed command by command for a small planted class of 10.1.

The instructor's clone is a copy of this checkout's files; the page's settings block is
added to its ``nbgrader_config.py`` (only the exchange's folder is moved into the test's
temporary folder); every command of its bash
blocks runs as written (``python`` and ``nbgrader`` from this environment), in order; the
learners' side (``nbgrader submit``, ``nbgrader fetch_feedback``, files, a Canvas zip) is
played in between. Each output is checked for its exact content, derived from the planted
answers' known points (tests/test_autograde.py's EXPECTED), the points in the instructor
notebook, the policy in the page's settings and the timestamps nbgrader wrote.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from grader.autograde.host.submissions import parse_timestamp, read_assignment
from grader.paths import with_python_tools
from tests.settings import ROOT
from tests.submissions import planted
from tests.test_autograde import EXPECTED

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "adopting.md"
A, NB = planted.ASSIGNMENT, "self_attention"
POINTS = dict(read_assignment(ROOT / "solutions" / A).exercises)  # exercise -> points
QKV, MODULE = "qkv_projections", "QKVProjection"
#: The class: who hands in what, and how. ``planted`` names the answer (EXPECTED's key).
EXCHANGE = {"ada": "correct", "bo": "wrong-qkv"}  # nbgrader submit, then nbgrader collect
FILES = {"cy": ("correct", planted.LATE), "dee": ("syntax-error", planted.ON_TIME)}  # received files
CANVAS = {"eve": ("correct", "1001", "2001", True), "fay": ("wrong-qkv", "1002", "2002", False)}
#: The Canvas students' submission times, the page's --submitted-at file (user_id, submitted_at).
CANVAS_TIMES = {"eve": planted.LATE, "fay": planted.ON_TIME}
CANVAS_ASSIGNMENT = "12345"  # the page's --canvas-assignment-id
B = "10.2-scaled-dot-product-attention"  # week 2 (step 8)
ROSTER = [("ada", "Ada", "Lovelace", "ada@example.org"), ("bo", "Bo", "Diddley", "bo@example.org"),
          ("cy", "Cy", "Young", "cy@example.org"), ("gus", "Gus", "Grissom", "gus@example.org")]


def page_blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(), flags=re.S)


def page_commands() -> list[str]:
    """Every command of the page's bash blocks, in order."""
    return [line.strip() for block in page_blocks("bash") for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def planted_notebook(name: str):
    """The notebook a planted student of ``name`` hands in (written through planted.py)."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    with_folder = scratch / f"adopting-{os.getpid()}"
    shutil.rmtree(with_folder, ignore_errors=True)
    planted.PLANTED[name](with_folder, "x")
    text = (with_folder / "x" / A / f"{NB}.ipynb").read_text()
    shutil.rmtree(with_folder, ignore_errors=True)
    return text


class Term:
    """The scratch course, the learners' folders, and every command's output."""

    def __init__(self, base: Path):
        self.base, self.course = base, base / "course"
        self.exchange, self.learners = base / "exchange", base / "learners"
        self.outputs: dict[str, str] = {}
        self.env = with_python_tools({k: v for k, v in os.environ.items() if k != "COURSE_ROOT"})
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"

    def set_up(self) -> None:
        """The instructor's clone: this checkout's files as they are now (not .git, not .venv)."""
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                                cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
        for name in filter(None, listed):
            if (ROOT / name).is_file():
                (self.course / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, self.course / name)
        (settings,) = page_blocks("python")
        settings = re.sub(r'c\.Exchange\.root = ".*?"', f'c.Exchange.root = "{self.exchange}"', settings)
        (self.course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text() + settings)
        self.exchange.mkdir()

    def run(self, command: str, cwd: Path | None = None, fails: bool = False) -> str:
        words = shlex.split(command)
        words[0] = sys.executable if words[0] == "python" else str(Path(sys.executable).parent / words[0])
        done = subprocess.run(words, cwd=cwd or self.course, env=self.env, capture_output=True,
                              text=True, timeout=300)
        assert (done.returncode != 0) == fails, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        self.outputs[command] = done.stdout + done.stderr
        return done.stdout

    # ------------------------------------------------------------ the learners' side

    def submit_through_exchange(self, course_id: str) -> None:
        for student, name in EXCHANGE.items():
            folder = self.learners / student / A
            folder.mkdir(parents=True)
            (folder / f"{NB}.ipynb").write_text(planted_notebook(name))
            self.run(f"nbgrader submit {A} --student={student} --course={course_id} "
                     f"{self.learner_exchange(student)}", cwd=self.learners / student)

    def learner_exchange(self, student: str) -> str:
        """A learner's view of the exchange: the shared folder, and a cache of their own (each
        learner is a user of their own; here all run as one, whose cache must stay clean)."""
        return f"--Exchange.root={self.exchange} --Exchange.cache={self.base / 'caches' / student}"

    def hand_in_files(self) -> None:
        for student, (name, stamp) in FILES.items():
            folder = self.course / "submitted" / student / A
            folder.mkdir(parents=True)
            (folder / f"{NB}.ipynb").write_text(planted_notebook(name))
            (folder / "timestamp.txt").write_text(stamp)

    def canvas_zip(self) -> None:
        with zipfile.ZipFile(self.course / "submissions.zip", "w") as zf:
            for student, (name, user, submission, late) in CANVAS.items():
                marker = "late_" if late else ""
                zf.writestr(f"{student}_{marker}{user}_{submission}_{NB}.ipynb", planted_notebook(name))
        rows = [f"{user},{CANVAS_TIMES[student]}" for student, (_, user, _, _) in CANVAS.items()]
        (self.course / "submission-times.csv").write_text("\n".join(["user_id,submitted_at", *rows]) + "\n")

    def write_roster(self) -> None:
        lines = ["student_id,first_name,last_name,email"] + [",".join(r) for r in ROSTER]
        (self.course / "roster.csv").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """The page followed from top to bottom; every command checked to have run once."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: make sandbox-deps")
    t = Term(tmp_path_factory.mktemp("adopting"))
    t.set_up()
    from grader.paths import course_config_file

    config = course_config_file(t.course)
    t.course_id = config.CourseDirectory.course_id
    t.policy = config.SharePerPeriod
    commands = page_commands()
    ran: list[str] = []

    def step(prefix: str) -> None:
        """Run the page's next commands, in its order, as long as they start with ``prefix``."""
        start = len(ran)
        while len(ran) < len(commands) and commands[len(ran)].startswith(prefix):
            t.run(commands[len(ran)])
            ran.append(commands[len(ran)])
        assert len(ran) > start, f"the page's next command is not {prefix}...: {commands[start:start + 1]}"

    step("python -m grader student-bundle")
    step("nbgrader release_assignment")
    t.submit_through_exchange(t.course_id)
    step("nbgrader collect")
    t.hand_in_files()
    t.canvas_zip()
    step("python -m grader autograde submitted/")
    step("python -m grader autograde submissions.zip")
    t.grades_before = (t.course / "graded/10.1/grades.csv").read_text()
    step("python -m grader gradebook")
    step("nbgrader release_feedback")
    for student in EXCHANGE:
        t.run(f"nbgrader fetch_feedback {A} --student={student} --course={t.course_id} "
              f"{t.learner_exchange(student)}", cwd=t.learners / student)
    step("python -m grader feedback")
    t.results_before = {p.relative_to(t.course): p.read_bytes()
                        for p in (t.course / "graded/10.1/results").glob("*/*.json")}
    (t.course / "submitted/dee" / A / f"{NB}.ipynb").write_text(planted_notebook("correct"))  # fixed
    step("python -m grader regrade")
    step("python -m grader gradebook")
    t.write_roster()
    step("python -m grader export")
    t.week1 = week_one(t)
    step("python -m grader autograde submitted/ --out graded/10.2/")
    step("python -m grader gradebook graded/10.2/")
    step("python -m grader export graded/10.1/ graded/10.2/")
    assert ran == commands, "the test ran the page's commands in another order, or not all"
    t.week2_exported = (t.course / "graded/moodle-grades.csv").read_text()
    t.week1_after_once = week_one(t)
    for command in commands[-3:]:  # week 2 again, as an instructor may
        t.run(command)
    t.week1_after_twice = week_one(t)
    mistake = commands[-3].replace(f" --assignment {B}", "")  # week 2 without --assignment
    assert mistake != commands[-3]
    t.run(mistake, fails=True)
    t.mistake = mistake
    return t


def week_one(t: Term) -> dict:
    """Week 1's grades.csv files, results and gradebook penalties, as they are now."""
    from nbgrader.api import Gradebook

    files = {p.relative_to(t.course): p.read_bytes() for folder in ("graded/10.1", "graded/10.1-canvas")
             for p in [t.course / folder / "grades.csv", *(t.course / folder / "results").glob("*/*.json")]}
    with Gradebook(f"sqlite:///{t.course / 'gradebook.db'}", t.course_id) as gb:
        penalties = {(s.student.id, s.assignment.name): (s.score, s.late_submission_penalty)
                     for s in gb.find_assignment(A).submissions}
    return {"files": files, "gradebook": penalties}


# ---------------------------------------------------------------- what each one should get


def seconds_late(stamp: str) -> float:
    deadline = datetime.fromisoformat(planted.DEADLINE).astimezone(timezone.utc)
    return max(0.0, (parse_timestamp(stamp) - deadline).total_seconds())


def expected_penalty(policy, raw: float, late_s: float) -> float:
    """The page's policy, computed here on its own: a share per started period after grace."""
    if late_s <= policy.grace_minutes * 60:
        return 0.0
    period = {"hour": 3600, "day": 86400}[policy.period]
    return round(raw * min(policy.cap, policy.share * math.ceil(late_s / period)), 4)


def fmt(value: float) -> str:
    return f"{value:g}"


def expected_row(term: Term, name: str, stamp: str | None, canvas_late: bool = False) -> dict:
    qkv, module = EXPECTED[name][:2]
    points = {QKV: POINTS[QKV] if qkv else 0, MODULE: POINTS[MODULE] if module else 0}
    raw = sum(points.values()) + (POINTS["qkv_parameters"] if qkv or module else 0)  # the prediction too
    late_s = seconds_late(stamp) if stamp else 0.0
    penalty = expected_penalty(term.policy, raw, late_s)
    return {"score": fmt(raw - penalty), "raw_score": fmt(raw), "late_penalty": fmt(penalty),
            QKV: fmt(points[QKV]), MODULE: fmt(points[MODULE]),
            "late": "yes" if late_s > 0 or canvas_late else "no"}


def grades(path: Path) -> dict[str, dict[str, str]]:
    return {r["student_id"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


COLUMNS = ["score", "raw_score", "late_penalty", QKV, MODULE, "late"]


def stamp_of(term: Term, student: str) -> str:
    return (term.course / "submitted" / student / A / "timestamp.txt").read_text()


# ---------------------------------------------------------------- the steps


def test_release(term):
    """The learners' release points at the repository given; the exchange has the notebook."""
    released = term.course.parent / "student-release" / "notebooks" / A / f"{NB}.ipynb"
    assert "example-org/transformer-2027@main" in released.read_text()
    assert (term.exchange / term.course_id / "outbound" / A / f"{NB}.ipynb").is_file()


def test_collect_keeps_nbgraders_files(term):
    for student in EXCHANGE:
        folder = term.course / "submitted" / student / A
        assert {p.name for p in folder.iterdir()} == {f"{NB}.ipynb", "timestamp.txt", "submission_secret.txt"}


def test_grades_csv_late_columns(term):
    """Every row's penalised score, raw score, penalty, points and late marker, exactly."""
    got = grades(term.course / "graded/10.1/grades.csv")
    stamps = {s: stamp_of(term, s) for s in [*EXCHANGE, *FILES]}
    names = {**EXCHANGE, **{s: n for s, (n, _) in FILES.items()}, "dee": "correct"}  # dee regraded
    want = {s: expected_row(term, names[s], stamps[s]) for s in names}
    assert {s: {c: r[c] for c in COLUMNS} for s, r in got.items()} == want
    assert any(w["late_penalty"] != "0" for w in want.values()), "the class has no late penalty to check"
    assert {r["late_source"] for r in got.values()} == {"timestamp.txt"}
    canvas = grades(term.course / "graded/10.1-canvas/grades.csv")
    assert {s: {c: r[c] for c in COLUMNS} for s, r in canvas.items()} == {
        f"{s}-{user}": expected_row(term, n, CANVAS_TIMES[s], late)
        for s, (n, user, _, late) in CANVAS.items()}
    assert {r["late_source"] for r in canvas.values()} == {"submitted-at"}
    assert canvas["eve-1001"]["late_penalty"] != "0", "the Canvas class has no late penalty to check"


def test_gradebook_holds_the_penalty(term):
    from nbgrader.api import Gradebook

    got = grades(term.course / "graded/10.1/grades.csv")
    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}", term.course_id) as gb:
        for student in [*EXCHANGE, *FILES]:
            submission = gb.find_submission(A, student)
            assert fmt(submission.late_submission_penalty) == got[student]["late_penalty"], student
            final = max(0.0, submission.score - submission.late_submission_penalty)
            assert fmt(final) == got[student]["score"], student


def test_feedback_released_and_fetched(term):
    """nbgrader release_feedback publishes our pages under nbgrader's hash; the learner's
    nbgrader fetch_feedback gets the very page."""
    from nbgrader.utils import notebook_hash

    for student in EXCHANGE:
        ours = (term.course / "graded/10.1/feedback" / student / A / f"{NB}.html").read_bytes()
        secret = (term.course / "submitted" / student / A / "submission_secret.txt").read_text()
        digest = notebook_hash(secret=secret, notebook_id=NB)  # how nbgrader names released pages
        released = term.exchange / term.course_id / "feedback" / f"{digest}.html"
        assert released.read_bytes() == ours
        (fetched,) = (term.learners / student / A / "feedback").glob(f"*/{NB}.html")
        assert fetched.read_bytes() == ours
    said = term.outputs["python -m grader gradebook graded/10.1/"]
    assert "feedback not placed for 2 submission(s)" in said and "cy/" in said and "dee/" in said


def test_feedback_bundles(term):
    folder = term.course / "graded/10.1-canvas/feedback-bundles"
    assert {p.name for p in folder.iterdir()} == {"eve-1001.zip", "fay-1002.zip", f"canvas-{A}.zip"}
    with zipfile.ZipFile(folder / "eve-1001.zip") as zf:
        assert zf.namelist() == [f"{A}/{NB}.html"]
    with zipfile.ZipFile(folder / f"canvas-{A}.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{s}_{'late_' if late else ''}{user}_{sub}_{NB}.html"
                                               for s, (_, user, sub, late) in CANVAS.items())


def test_regrade_touches_no_one_else(term):
    """dee's fixed file is graded; every other result is byte for byte what it was; dee's
    earlier result is kept in previous/."""
    after = {p.relative_to(term.course): p.read_bytes()
             for p in (term.course / "graded/10.1/results").glob("*/*.json")}
    dee = Path("graded/10.1/results/dee") / f"{A}.json"
    others = {k: v for k, v in term.results_before.items() if k != dee}
    assert {k: v for k, v in after.items() if k != dee} == others
    (kept,) = (term.course / "graded/10.1/previous").glob(f"*/results/dee/{A}.json")
    assert kept.read_bytes() == term.results_before[dee]
    old = json.loads(kept.read_text())
    qkv, module = EXPECTED["syntax-error"][:2]
    assert old["score"] == (POINTS[QKV] if qkv else 0) + (POINTS[MODULE] if module else 0) + \
        (POINTS["qkv_parameters"] if qkv or module else 0)


def test_canvas_csv(term):
    got = (term.course / "graded/10.1-canvas/canvas-grades.csv").read_text()
    rows = [f"{s},{user},,,,{expected_row(term, n, CANVAS_TIMES[s], late)['score']}"
            for s, (n, user, _, late) in sorted(CANVAS.items())]
    assert got == "\n".join([f"Student,ID,SIS User ID,SIS Login ID,Section,{A} ({CANVAS_ASSIGNMENT})",
                             f"Points Possible,,,,,{fmt(sum(POINTS.values()))}", *rows]) + "\n"


def test_moodle_csv_and_what_it_reports(term):
    got = (term.course / "graded/10.1/moodle-grades.csv").read_text()
    scores = grades(term.course / "graded/10.1/grades.csv")
    rows = [f"{first},{last},,{email},{scores[s]['score'] if s in scores else ''}"
            for s, first, last, email in ROSTER]
    assert got == "\n".join([f"First name,Last name,ID number,Email address,{A}", *rows]) + "\n"
    said = term.outputs["python -m grader export graded/10.1/ --lms moodle --roster roster.csv"]
    assert "NOT EXPORTED, not in the roster (1): dee" in said
    assert "in the roster, no result in this run, left empty (1): gus" in said


def test_report_counts_add_up(term):
    """Per exercise, partial + zero = named mistakes + no mistake named + did not run."""
    rows = list(csv.DictReader((term.course / "graded/10.1/report.csv").open()))
    for exercise in (QKV, MODULE):
        count = {r["measure"]: 0 for r in rows}
        for r in rows:
            if r["exercise"] == exercise:
                count[r["measure"]] = count.get(r["measure"], 0) + int(r["count"])
        assert count["partial"] + count["zero"] == (count.get("mistake", 0) + count.get("no mistake named", 0)
                                                    + count.get("did not run", 0)), exercise
    penalised = [r for r in rows if r["measure"] == "late penalty"]
    assert penalised[0]["students"].split() == sorted(
        s for s, r in grades(term.course / "graded/10.1/grades.csv").items() if r["late_penalty"] != "0")


def test_week_two_twice_leaves_week_one_as_it_was(term):
    """Step 8, run twice: week 1's grades.csv, results and gradebook penalties are byte for
    byte what they were; week 2's folder holds 10.2 only; the joint export's 10.1 column is
    week 1's; week 2 without --assignment (10.1 again, without its deadline) is refused."""
    assert term.week1_after_once == term.week1 and term.week1_after_twice == term.week1
    assert any(p for _, p in term.week1["gradebook"].values()), "week 1 has no penalty to keep"
    assert {r["assignment"] for r in grades(term.course / "graded/10.2/grades.csv").values()} == {B}
    joint = {r["Email address"]: r for r in csv.DictReader(io.StringIO(term.week2_exported))}
    week1 = {r["Email address"]: r for r in csv.DictReader(
        (term.course / "graded/10.1/moodle-grades.csv").open())}
    assert {e: r[A] for e, r in joint.items()} == {e: r[A] for e, r in week1.items()}
    assert set(next(iter(joint.values()))) >= {A, B}
    said = term.outputs.get(term.mistake, "")
    assert f"{A} was graded with deadline" in said and "--force" in said
