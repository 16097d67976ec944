"""An instructor's LMS batch, file by file: every file ends as a graded row, a flagged row or a
listed file; each student is the LMS's id, never a display name (issue: nothing lost between
the LMS and the gradebook). No kernel runs here: what grading does with each row is
tests/test_autograde.py's."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import re
import zipfile
from pathlib import Path

import pytest

from grader.__main__ import main
from grader.autograde.host.options import Options
from grader.autograde.host.out_folder import Out
from grader.autograde.host.rerun import check_rerun
from grader.autograde.host.run import autograde
from grader.autograde.host.submissions import (
    course_assignments,
    discover,
    extract_zip,
    read_lms,
    read_unplaced,
)
from grader.autograde.host.submitted_at import read_submitted_at
from grader.errors import ExportError, UsageError
from grader.export import export
from grader.late import FROM_LMS, FROM_SUBMITTED_AT, FROM_TIMESTAMP, NO_SOURCE
from grader.paths import COURSE_ID, with_python_tools
from grader.results import csv_text
from samples import ROOT, notebook_path
from tests.test_instructors import canvas, course, policy, result, run_out

A, B = "10.1-self-attention", "10.2-scaled-dot-product-attention"
NB = notebook_path(A, "notebooks").read_bytes()
OTHER = notebook_path(B, "notebooks").read_bytes()  # 10.2's notebook
EXERCISES = ["qkv_projections", "QKVProjection"]  # tests.test_instructors.result's

CANVAS = {  # file in the zip: what must become of it
    "smithjohn_60001_1_self_attention.ipynb": ("smithjohn-60001", "graded"),
    "smithjohn_60002_2_self_attention.ipynb": ("smithjohn-60002", "graded"),  # the same name, another id
    "doejane_late_60003_3_Untitled.ipynb": ("doejane-60003", "renamed"),
    "roebob_60004_4_self_attention (1).ipynb": ("roebob-60004", "renamed"),
    "leeann_60005_5_self_attention.ipynb": ("leeann-60005", "graded"),
    "leeann_60005_6_self_attention-Copy1.ipynb": ("leeann-60005", "also handed in"),
    "kimmo_60006_7_scaled_dot_product_attention.ipynb": ("kimmo-60006", "holds the exercises of " + B),
    "notes.txt": (None, "neither"),
}
MOODLE = {
    "John Smith_101_assignsubmission_file_/self_attention.ipynb": ("johnsmith-101", "graded"),
    "John Smith_102_assignsubmission_file_/Untitled.ipynb": ("johnsmith-102", "renamed"),
    "Ann Lee_103_assignsubmission_file_/": ("annlee-103", "no submission"),
}


def zipped(path: Path, files: dict) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name in files:
            zf.writestr(name, b"" if name.endswith("/") else OTHER if "scaled" in name
                        else b"I ran out of time" if name.endswith(".txt") else NB)
    return path


def fates(archive: Path, dest: Path) -> dict[str, list[str]]:
    """Each student's rows (problem or review flags, or 'graded') and the unplaced files."""
    assignments = course_assignments(ROOT / "solutions")
    root = extract_zip(archive, dest, assignments, [A])
    subs = discover(root, assignments, [A])
    out = {s.student: [s.problem] if s.problem else (s.review or ["graded"]) for s in subs}
    out[None] = list(read_unplaced(root).values())
    return out


def test_every_canvas_file_is_a_row_or_listed(tmp_path):
    got = fates(zipped(tmp_path / "canvas.zip", CANVAS), tmp_path / "x")
    for file, (student, fate) in CANVAS.items():
        assert any(fate in said for said in got[student]), (file, got[student])
    students = {s for s, _ in CANVAS.values() if s}
    assert set(got) - {None} == students  # two John Smiths are two rows; nobody else appears
    lms = read_lms(tmp_path / "x")
    assert lms[("smithjohn-60001", A)]["user_id"] == "60001" and lms[("doejane-60003", A)]["late"] == "yes"
    assert lms[("smithjohn-60002", A)]["name"] == "smithjohn"


def test_every_moodle_file_is_a_row_or_listed(tmp_path):
    got = fates(zipped(tmp_path / "moodle.zip", MOODLE), tmp_path / "x")
    for file, (student, fate) in MOODLE.items():
        assert any(fate in said for said in got[student]), (file, got[student])
    assert set(got) - {None} == {s for s, _ in MOODLE.values()} and not got[None]
    assert read_lms(tmp_path / "x")[("johnsmith-101", A)]["participant_id"] == "101"


def test_a_zip_of_two_assignments_asks_which_one_a_renamed_file_is(tmp_path):
    """Without --assignment and with recognised notebooks of two assignments, a renamed file
    cannot be placed: it is listed with what to do, not dropped."""
    files = {"ann_1_1_self_attention.ipynb": 0, "bo_2_2_scaled_dot_product_attention.ipynb": 0,
             "cy_3_3_Untitled.ipynb": 0}
    assignments = course_assignments(ROOT / "solutions")
    root = extract_zip(zipped(tmp_path / "two.zip", files), tmp_path / "x", assignments)
    assert "--assignment" in read_unplaced(root)["cy_3_3_Untitled.ipynb"]
    assert {s.key for s in discover(root, assignments)} >= {("ann-1", A), ("bo-2", B)}


# ---------------------------------------------------------------- submission times of a zip

DEADLINE = "2026-12-01T23:59:00+00:00"
WAS_GRADED = re.escape(f"{A} was graded with deadline {DEADLINE} (")


def batch(tmp_path: Path, files: dict):
    assignments = course_assignments(ROOT / "solutions")
    root = extract_zip(zipped(tmp_path / "lms.zip", files), tmp_path / "x", assignments, [A])
    return discover(root, assignments, [A]), read_lms(root)


def test_submitted_at_matches_canvas_ids_and_lists_the_rest(tmp_path):
    subs, lms = batch(tmp_path, CANVAS)
    times = tmp_path / "times.csv"
    times.write_text("Student,ID,Submitted At\nJohn Smith,60001,2026-12-02T02:30:00Z\n"
                     "John Smith,60002,2026-12-01 20:00:00+01:00\nJane Doe,60003,\n"
                     "Ghost,99999,2026-12-01T10:00Z\n")
    got = read_submitted_at(times, subs, lms)
    assert got.times == {("smithjohn-60001", A): "2026-12-02T02:30:00+00:00",
                         ("smithjohn-60002", A): "2026-12-01T19:00:00+00:00"}
    assert got.unknown == ["99999 (user_id)"] and "99999" in " ".join(got.text())
    assert set(got.missing) == {s for s, _ in CANVAS.values() if s} - {"smithjohn-60001", "smithjohn-60002"}
    assert "no late penalty" in " ".join(got.text())


def test_submitted_at_reads_moodles_grading_worksheet(tmp_path):
    subs, lms = batch(tmp_path, MOODLE)
    sheet = tmp_path / "worksheet.csv"
    sheet.write_text('Identifier,Full name,Email address,Status,Last modified (submission)\n'
                     'Participant 101,John Smith,j@x.org,Submitted,"Tuesday, 2 December 2026, 1:10 AM"\n'
                     'Participant 102,John Smith,j2@x.org,Submitted,-\n'
                     'Participant 103,Ann Lee,a@x.org,No submission,-\n')
    got = read_submitted_at(sheet, subs, lms)
    assert got.times == {("johnsmith-101", A): "2026-12-02T01:10:00+00:00"}
    assert got.missing == ["johnsmith-102"] and not got.unknown  # annlee-103 handed in nothing


@pytest.mark.parametrize(("text", "said"), [
    ("ID,Grade\n1,3\n", "its columns: ID, Grade"),
    ("ID,submitted_at\n60001,yesterday-ish\n", "cannot read the time")])
def test_a_submitted_at_file_it_cannot_read_says_why(tmp_path, text, said):
    subs, lms = batch(tmp_path, CANVAS)
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(UsageError, match=said):
        read_submitted_at(tmp_path / "t.csv", subs, lms)


def test_submitted_at_times_get_the_course_policy_and_say_so(tmp_path):
    """A zip row's time from --submitted-at is penalised as a folder's timestamp.txt is; a
    folder's own time is kept; a row without a time gets none. late_source says which."""
    p = policy(tmp_path)
    rows = [canvas("eve", "1"), canvas("fay", "2"),
            result("cy", submitted_at="2026-12-02T00:30:00+00:00", seconds_late=31 * 60)]
    times = {("eve", A): "2026-12-02T02:30:00+00:00", ("cy", A): "2026-12-03T00:00:00+00:00"}
    out = Out(tmp_path / "out", EXERCISES, p, deadline=lambda a: DEADLINE, times=times)
    out.settle(rows)
    plugin = p.plugin
    want = {"eve": 4.0 * min(plugin.cap, plugin.share * math.ceil((2 * 3600 + 31 * 60) / 3600)),
            "fay": 0.0, "cy": 4.0 * plugin.share}
    assert {r.student_id: r.late_penalty for r in rows} == pytest.approx(want)
    got = {r["student_id"]: r for r in csv.DictReader(io.StringIO(csv_text(rows, EXERCISES)))}
    assert {s: r["late_source"] for s, r in got.items()} == {
        "eve": FROM_SUBMITTED_AT, "fay": FROM_LMS, "cy": FROM_TIMESTAMP}
    assert got["eve"]["seconds_late"] == str(2 * 3600 + 31 * 60) and got["eve"]["late"] == "yes"
    assert Out(tmp_path / "o2", EXERCISES, p, deadline=lambda a: None).settle([result("dee")]) and \
        result("dee").late_source == "" and NO_SOURCE == "none"


# ---------------------------------------------------------------- reruns with other deadlines


def graded_out(folder: Path, deadlines: dict, student: str = "ada") -> Path:
    """OUT of an earlier run that graded ``student`` with ``deadlines``."""
    run_out(folder, [result(student)])
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "options": {"deadlines": deadlines}}))
    return folder


def test_a_rerun_without_the_deadline_is_refused(tmp_path):
    """Grading again into OUT without the deadline (or with another) would change penalties:
    refused before anything is graded or written, unless --force."""
    (tmp_path / "sub" / "ada" / A).mkdir(parents=True)
    (tmp_path / "sub" / "ada" / A / "self_attention.ipynb").write_bytes(NB)
    out = graded_out(tmp_path / "out", {A: DEADLINE})
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for deadlines in ({}, {A: "2026-12-08T23:59:00+00:00"}):
        with pytest.raises(UsageError, match=WAS_GRADED + ".*--force"):
            autograde(tmp_path / "sub", out, Options(deadlines=deadlines, solutions=ROOT / "solutions",
                                                      progress=False))
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    now = {"keys": [["ada", A]], "options": {"deadlines": {}}}
    forced = check_rerun(out, now, {A}, Options(force=True, solutions=ROOT / "solutions"))
    assert forced and "no deadline" in forced[0]
    same = {"keys": [["ada", A]], "options": {"deadlines": {"*": "2026-12-02T00:59:00+01:00"}}}
    assert check_rerun(out, same, {A}, Options(solutions=ROOT / "solutions")) == []  # the same time


def test_the_gradebooks_due_date_guards_a_new_out_folder(tmp_path, monkeypatch):
    """Week 2 graded into a new folder without --assignment grades week 1 again: the course
    gradebook holds week 1's due date, so that is refused too."""
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", with_python_tools(dict(os.environ))["PATH"])  # nbgrader's alembic
    root = course(tmp_path / "course")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        gb.update_or_create_assignment(A, duedate="2026-12-01 23:59:00")
        gb.update_or_create_assignment(B)
    now = {"keys": [["ada", A], ["ada", B]], "options": {"deadlines": {B: "2026-12-08T23:59:00+00:00"}}}
    with pytest.raises(UsageError, match=WAS_GRADED + ".*gradebook.db"):
        check_rerun(tmp_path / "new-out", now, set(), Options(solutions=root / "solutions"))
    only_b = {"keys": [["ada", B]], "options": now["options"]}
    assert check_rerun(tmp_path / "new-out", only_b, set(), Options(solutions=root / "solutions")) == []


# ---------------------------------------------------------------- export of several runs


def test_export_joins_runs_and_refuses_to_mix_late_settings(tmp_path):
    week1 = graded_out(tmp_path / "w1", {A: DEADLINE})
    week2 = tmp_path / "w2"
    run_out(week2, [dataclasses.replace(result("ada", score=1.0), assignment=B)])
    manifest = json.loads((week2 / "manifest.json").read_text())
    (week2 / "manifest.json").write_text(json.dumps({**manifest, "options": {"deadlines": {B: DEADLINE}}}))
    text = export([week1, week2], "moodle", roster(tmp_path)).path.read_text()
    assert text.splitlines() == [f"First name,Last name,ID number,Email address,{A},{B}",
                                 "Ada,L,,ada@x.org,4,1"]
    graded_out(week2, {})  # week 2's folder also holds week 1's assignment, graded without its deadline
    with pytest.raises(ExportError, match=f"{A} was graded with different late settings.*no deadline"
                                          ".*Export the run whose settings are right alone"):
        export([week1, week2], "moodle", roster(tmp_path))


def roster(tmp_path: Path) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text("student_id,first_name,last_name,email\nada,Ada,L,ada@x.org\n")
    return path


def test_canvas_assignment_id_names_the_column_as_canvas_does(tmp_path, capsys):
    out = run_out(tmp_path / "out", [canvas("ada", "11")])
    assert main(["export", str(out), "--lms", "canvas", "--canvas-assignment-id", "12345"]) == 0
    head = (out / "canvas-grades.csv").read_text().splitlines()[0]
    assert head == f"Student,ID,SIS User ID,SIS Login ID,Section,{A} (12345)"
    assert main(["export", str(out), "--lms", "canvas", "--canvas-assignment-id", f"{B}=1"]) != 0
    assert main(["export", str(out), "--lms", "canvas", "--canvas-assignment-id", "abc"]) != 0
    said = capsys.readouterr().err
    assert f"give ASSIGNMENT=ID for one of {A}" in said and "numeric assignment id" in said
