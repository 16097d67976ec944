"""Does stock nbgrader run the course end to end: generate, submit, autograde, export?"""

import csv
import os
import shutil
import subprocess
import sys

import pytest

from grader.paths import NBGRADER_CONFIG, course_root, with_python_tools

pytestmark = pytest.mark.slow  # starts kernels

ROOT = course_root()

ASSIGNMENT = "10.1-self-attention"
NOTEBOOK = "self_attention.ipynb"


def nbgrader(course, *args):
    """Run an nbgrader command in ``course``; fail with its log on error."""
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                            env=with_python_tools(dict(os.environ)),  # it runs alembic by name
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """A temporary course where alice submits the solution and bob the untouched notebook."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(NBGRADER_CONFIG, course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    for student, folder in (("alice", "solutions"), ("bob", "notebooks")):
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copy(course / folder / ASSIGNMENT / NOTEBOOK, target / NOTEBOOK)
    nbgrader(course, "autograde", ASSIGNMENT, "--create", "--force")
    nbgrader(course, "export", "--to", str(course / "grades.csv"))
    with open(course / "grades.csv") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def test_solution_gets_full_marks(graded_course):
    """Does the instructor solution, submitted as a learner's, earn every point?"""
    row = graded_course["alice"]
    assert float(row["max_score"]) > 0
    assert float(row["score"]) == float(row["max_score"])


def test_blank_notebook_gets_zero(graded_course):
    """Does the untouched learner notebook earn nothing?"""
    assert float(graded_course["bob"]["score"]) == 0.0
