"""A week of the term through nbgrader's own exchange, with real Unix users: the steps of
docs/grading.md ("A term, week by week"), in their order.

An instructor and two learners, each a Unix user with a home of their own, and an exchange
folder of mode 1777, as on a shared JupyterHub. The instructor releases 10.1 with nbgrader;
each learner lists and fetches it, answers (one right answer, one planted mistake) and
submits; the instructor collects; the grading account grades ``submitted/`` with
``python -m grader autograde`` and imports the run into the course's gradebook; the
instructor releases the feedback and each learner fetches their own page, and nobody
else's.

The users run nbgrader from a virtual environment outside any home (``make exchange-deps``:
a venv under a mode-700 home cannot be run by another user), with its ``bin`` on PATH
(nbgrader runs ``alembic`` by name when it makes a gradebook). Needs root and useradd.
"""

from __future__ import annotations

import csv
import inspect
import io
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import nbformat
import pytest

import samples
from tests.answers.s10_1 import qkv_projection_module, qkv_projections
from tests.settings import ROOT
from tests.submissions import planted
from tests.unix_course import exchange_course, need_root, write_as

pytestmark = pytest.mark.slow

ASSIGNMENT = planted.ASSIGNMENT
NOTEBOOK = samples.notebook_name(ASSIGNMENT)
DIAGNOSIS = "K computed with W_q"  # course.visible.s10_1.qkv_projections.K_FROM_Q


def right_answer():
    """The released notebook answered another way than the solutions (tests/answers/s10_1)."""
    qkv = inspect.getsource(qkv_projections.qkv_einsum).replace("def qkv_einsum", "def qkv_projections")
    module = (inspect.getsource(qkv_projection_module.Separate) + "\n\n"
              + inspect.getsource(qkv_projection_module.Matmul).replace(
                  "class Matmul(Separate)", "class QKVProjection(Separate)"))
    return qkv, module


def root_grader(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def hub():
    """The exchange, the users and the instructor's course folder; removed afterwards."""
    need_root("the exchange test")
    with exchange_course(["a", "b"]) as course:
        yield course


def test_a_week_through_nbgrader_exchange(hub):
    """Release, fetch, submit, collect, autograde, gradebook, feedback released and fetched:
    does each learner get their own diagnosis, nobody else's, and the gradebook both scores?"""
    users, course = hub["users"], hub["course"]
    instructor, (right, wrong) = hub["instructor"], hub["learners"]
    deadline = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat(timespec="seconds")

    # 1. release (the learner notebooks are generated: make notebooks)
    users.run(instructor, "nbgrader", "release_assignment", ASSIGNMENT, cwd=course)
    # learners: list, fetch, answer, submit
    qkv, module = right_answer()
    answers = {right: {"qkv_projections": qkv, "QKVProjection": module},
               wrong: {"qkv_projections": planted.WRONG_QKV, "QKVProjection": module}}
    for learner, cells in answers.items():
        assert ASSIGNMENT in users.run(learner, "nbgrader", "list")
        users.run(learner, "nbgrader", "fetch_assignment", ASSIGNMENT)
        path = users.home(learner) / ASSIGNMENT / NOTEBOOK
        nb = nbformat.read(path, as_version=4)
        for grade_id, source in cells.items():
            nb = samples.plant(nb, grade_id, source, append=False)
        write_as(learner, path, nbformat.writes(nb))
        users.run(learner, "nbgrader", "submit", ASSIGNMENT)

    # 2. collect
    users.run(instructor, "nbgrader", "collect", ASSIGNMENT, cwd=course)
    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == sorted([right, wrong])

    # 3. autograde, straight from nbgrader's submitted/ (the grading account: root here; its
    # OUT outside the instructor's private home, which bubblewrap's namespace cannot enter)
    out = hub["base"] / "graded" / ASSIGNMENT
    root_grader("autograde", str(submitted), "--out", str(out), "--assignment", ASSIGNMENT,
                "--deadline", deadline, "--jobs", "2", "--timeout", "60", "--quiet")
    grades = (out / "grades.csv").read_text()

    # 4. grades into the course's gradebook; the feedback where release_feedback reads it
    db = course / "gradebook.db"
    root_grader("gradebook", str(out), "--db", f"sqlite:///{db}")
    placed = {page.parent.parent.name for page in course.glob(f"feedback/*/{ASSIGNMENT}/*.html")}
    assert placed == {right, wrong}  # the import puts each page where release_feedback reads it
    subprocess.run(["chown", "-R", f"{instructor}:{instructor}", str(course)], check=True)
    users.run(instructor, "nbgrader", "release_feedback", ASSIGNMENT, cwd=course)

    # learners fetch their feedback: their own page only
    pages = {}
    for learner in (right, wrong):
        users.run(learner, "nbgrader", "fetch_feedback", ASSIGNMENT)
        (page,) = (users.home(learner) / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK[:-6]}.html")
        pages[learner] = page.read_text()
    assert DIAGNOSIS in pages[wrong] and DIAGNOSIS not in pages[right]
    assert wrong not in pages[right] and right not in pages[wrong]
    outbound = hub["exchange"] / "transformer-course" / "feedback"
    listing = subprocess.run(["runuser", "-u", right, "--", "ls", str(outbound)], capture_output=True)
    assert listing.returncode != 0  # learners cannot list the others' pages

    # the gradebook holds both scores, as grades.csv says
    with sqlite3.connect(db) as connection:
        scores = dict(connection.execute(
            "SELECT student.id, SUM(COALESCE(grade.manual_score, grade.auto_score)) FROM grade "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
            "JOIN student ON submitted_assignment.student_id = student.id GROUP BY student.id"))
    assert scores == {right: 4, wrong: 2}
    rows = {row["student_id"]: row["score"] for row in csv.DictReader(io.StringIO(grades))}
    assert rows == {right: "4", wrong: "2"}
