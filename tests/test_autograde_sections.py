"""Grading every section: does a perfect submission of each notebook get full marks, and how
long does one take? Does the benchmark against stock nbgrader still run?

The sections are discovered from solutions/ (those with a generated learner notebook), so
new sections are covered as they land.
"""

from __future__ import annotations

import csv
import io

import pytest

import samples
from grader import results as report
from grader.autograde.host.options import Options
from grader.autograde.host.run import autograde
from grader.autograde.host.submissions import course_assignments
from grader.paths import assignment_names
from tests.settings import ROOT

pytestmark = pytest.mark.slow


def sections() -> list[str]:
    """Assignments with an instructor notebook and a generated learner notebook."""
    return [name for name, a in course_assignments(ROOT / "solutions").items()
            if (ROOT / "notebooks" / name / f"{a.notebooks[0]}.ipynb").is_file()]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("solved")
    for name in sections():
        samples.write(samples.solved(name), root, "perfect", name)
    out = tmp_path_factory.mktemp("out")
    summary = autograde(root, out, Options(jobs=2, timeout=120, progress=False))
    rows = list(csv.DictReader(io.StringIO((out / "grades.csv").read_text())))
    return summary, rows, report.load_results(out)


def test_every_section_is_found():
    """Is every assignment of solutions/ a section here, with its learner notebook?"""
    assert sections() == assignment_names(ROOT / "solutions")
    assert len(sections()) >= 6 and sections()[0] == "10.1-self-attention"


def test_perfect_submissions_get_full_marks(graded):
    """Does the instructor's solution of every section, handed in as a learner would, get
    every point, with its integrity records verified?"""
    summary, rows, results = graded
    assert {r["assignment"] for r in rows} == set(sections())
    for row in rows:
        assert row["status"] == "ok", (row["assignment"], row["reason"])
        assert row["score"] == row["max_score"] != "0", row["assignment"]
    timings = {a: round(r.elapsed_s, 1) for (_, a), r in sorted(results.items())}
    print("seconds to grade one submission:", timings)
