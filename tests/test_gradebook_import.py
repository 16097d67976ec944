"""Grades where nbgrader users look: ``python -m grader gradebook OUT`` imports the planted
batch into a course's nbgrader gradebook; nbgrader's own Gradebook, formgrader's API and
``nbgrader export`` then agree with grades.csv, and a person's manual scores survive a
re-import. The course is a scratch copy (solutions/ and the nbgrader configuration): the
checkout's own gradebook.db is never touched.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, MissingEntry

from grader.__main__ import main
from grader.errors import GradebookError
from grader.gradebook import import_run
from grader.paths import COURSE_ID, with_python_tools
from grader.publish.generate import nbgrader_api
from tests.settings import ROOT
from tests.submissions import planted

ASSIGNMENT, NOTEBOOK = planted.ASSIGNMENT, "self_attention"


def scratch_course(folder: Path) -> Path:
    """A course folder nbgrader runs in: solutions/ and the configuration, no gradebook yet."""
    shutil.copytree(ROOT / "solutions", folder / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", folder)
    (folder / "grader").mkdir()
    shutil.copy(ROOT / "grader" / "nbgrader_config.py", folder / "grader")
    return folder


def db(course: Path) -> str:
    return f"sqlite:///{course / 'gradebook.db'}"


def dump(course: Path) -> list[str]:
    """The whole gradebook as sorted SQL lines (to compare two states)."""
    with sqlite3.connect(course / "gradebook.db") as connection:
        return sorted(connection.iterdump())


def csv_rows(text: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["student_id"], r["assignment"]): r for r in csv.DictReader(io.StringIO(text))}


def nbgrader_export(course: Path) -> dict[tuple[str, str], dict[str, str]]:
    """``nbgrader export`` run in the course folder, as an instructor would."""
    target = course / "export.csv"
    env = with_python_tools({k: v for k, v in os.environ.items() if k != "COURSE_ROOT"})
    done = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "export", "--to", str(target)],
                          cwd=course, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return csv_rows(target.read_text())


def grade(gb: Gradebook, student: str, grade_id: str):
    return gb.find_grade(grade_id, NOTEBOOK, ASSIGNMENT, student)


@pytest.fixture(scope="module")
def imported(batch, tmp_path_factory):
    course = scratch_course(tmp_path_factory.mktemp("course"))
    first = import_run(batch["out"], root=course)
    rows = csv_rows(batch["csv"])
    notebooks = sum(1 for student, assignment in rows
                    if (batch["out"] / "autograded" / student / assignment).is_dir())
    return {"course": course, "summary": first, "csv": rows, "out": batch["out"], "notebooks": notebooks}


# ---------------------------------------------------------------- the same scores everywhere


@pytest.mark.slow
def test_gradebook_scores_are_grades_csv(imported):
    """Does nbgrader's Gradebook hold every student, and each submission's score and maximum
    exactly as grades.csv has them (no submission, and 0, where nothing could be graded)?"""
    rows = imported["csv"]
    with Gradebook(db(imported["course"]), COURSE_ID) as gb:
        assert {s.id for s in gb.students} == {student for student, _ in rows}
        graded = 0
        for (student, assignment), row in rows.items():
            try:
                submission = gb.find_submission(assignment, student)
            except MissingEntry:
                assert row["status"] == "error" and float(row["score"]) == 0, row
                continue
            graded += 1
            assert submission.score == float(row["score"]), (student, submission.score, row["score"])
            assert submission.max_score == float(row["max_score"]), student
            stamp = submission.timestamp.isoformat() if submission.timestamp else ""
            assert stamp == row["submitted_at"], student
    assert graded == imported["summary"].submissions_added == imported["notebooks"] > 0
    assert len(imported["summary"].not_graded) == len(rows) - graded


@pytest.mark.slow
def test_nbgrader_export_gives_grades_csv(imported):
    """Does ``nbgrader export`` give every student the score of grades.csv, and leave the rows
    that are not a grade yet (flagged, error) empty, as ``grader export`` does?"""
    exported = nbgrader_export(imported["course"])
    rows = imported["csv"]
    assert set(exported) == set(rows)
    for key, row in rows.items():
        want = float(row["score"]) if row["status"] == "ok" else ""
        got = exported[key]["score"] and float(exported[key]["score"])
        assert got == want, (key, exported[key], row)
    assert exported[("late", ASSIGNMENT)]["timestamp"] == "2026-12-02 01:30:00"
    assert exported[("late", ASSIGNMENT)]["duedate"] == "2026-12-01 23:59:00"


@pytest.mark.slow
def test_corrections_and_flags_as_formgrader_shows_them(imported):
    """A flagged submission: the autograder's points as auto_score, the grader's correction as
    manual_score, listed for manual review, the flag in the comment box of its cell, and the
    graded notebook where formgrader opens it."""
    course = imported["course"]
    with Gradebook(db(course), COURSE_ID) as gb:
        flagged = grade(gb, "cheat-edit-checks", "check_qkv_projections")
        assert (flagged.auto_score, flagged.manual_score, flagged.score) == (2, 0, 0)
        assert flagged.needs_manual_grade
        comment = gb.find_comment("qkv_projections", NOTEBOOK, ASSIGNMENT, "cheat-edit-checks")
        assert comment.auto_comment.startswith("course-grader: flagged: qkv_projections: outputs do not")
        assert comment.manual_comment is None
        clean = grade(gb, "correct", "check_qkv_projections")
        assert (clean.auto_score, clean.manual_score, clean.needs_manual_grade) == (2, None, False)
        died = gb.find_comment("qkv_projections", NOTEBOOK, ASSIGNMENT, "os-exit")
        assert "error: " in died.auto_comment and "exit code 3" in died.auto_comment
    listed = {s["student"]: s for s in nbgrader_api(course).get_notebook_submissions(ASSIGNMENT, NOTEBOOK)}
    review = {student for student, s in listed.items() if s["needs_manual_grade"]}
    assert review == {s for (s, _), row in imported["csv"].items() if row["status"] == "flagged"
                      or row["status"] == "error"  # not graded whole, with a graded notebook: listed too
                      and (imported["out"] / "autograded" / s / ASSIGNMENT).is_dir()}
    assert (course / "autograded" / "cheat-edit-checks" / ASSIGNMENT / f"{NOTEBOOK}.ipynb").is_file()


# ---------------------------------------------------------------- importing again


@pytest.mark.slow
def test_importing_again_changes_nothing(batch, imported):
    """Is a second import of the same run a no-op, byte for byte in the database?"""
    before = dump(imported["course"])
    again = import_run(batch["out"], root=imported["course"])
    assert (again.submissions_added, again.submissions_updated, again.unchanged) == \
        (0, 0, imported["notebooks"])
    assert again.students_added == again.assignments_added == []
    assert dump(imported["course"]) == before


@pytest.mark.slow
def test_manual_scores_survive_a_reimport(batch, imported, tmp_path):
    """Scores a person entered in formgrader (one over a correction, one over an autograded
    score) are kept by a later import, and nbgrader export shows them."""
    course = scratch_course(tmp_path / "course")
    import_run(batch["out"], root=course)
    with Gradebook(db(course), COURSE_ID) as gb:
        for student, value in (("wrong-qkv", 1.5), ("cheat-edit-checks", 1.0)):
            entered = grade(gb, student, "check_qkv_projections")
            entered.manual_score, entered.needs_manual_grade = value, False  # as formgrader saves it
        gb.db.commit()
    summary = import_run(batch["out"], root=course)
    assert summary.submissions_updated == 0
    assert summary.kept_manual == [f"cheat-edit-checks/{ASSIGNMENT}/check_qkv_projections: 1 "
                                   "(the grader says 0)"]
    with Gradebook(db(course), COURSE_ID) as gb:
        assert grade(gb, "wrong-qkv", "check_qkv_projections").manual_score == 1.5
        assert not grade(gb, "cheat-edit-checks", "check_qkv_projections").needs_manual_grade
    exported = nbgrader_export(course)
    def graded(student, exercise):  # what the grader gave, where no person entered a score
        return float(imported["csv"][(student, ASSIGNMENT)][exercise])

    assert float(exported[("wrong-qkv", ASSIGNMENT)]["score"]) == \
        1.5 + graded("wrong-qkv", "QKVProjection") + graded("wrong-qkv", "qkv_parameters")
    assert float(exported[("cheat-edit-checks", ASSIGNMENT)]["score"]) == \
        1.0 + graded("cheat-edit-checks", "QKVProjection") + graded("cheat-edit-checks", "qkv_parameters")


@pytest.mark.slow
def test_a_regrade_updates_what_the_import_wrote(batch, imported, tmp_path):
    """After a regrade that lifts a flag, the correction the import wrote goes away (it was
    not a person's), and the submission is listed for review again only if there is news."""
    out = tmp_path / "out"
    shutil.copytree(batch["out"], out, ignore=shutil.ignore_patterns("feedback", "logs", ".cache"))
    course = scratch_course(tmp_path / "course")
    import_run(out, root=course)
    path = out / "results" / "cheat-skip-check" / f"{ASSIGNMENT}.json"
    result = json.loads(path.read_text())
    points = {**result["points"], "qkv_projections": 2.0, "QKVProjection": 2.0}
    result.update(flags=[], status="ok", reason="", score=sum(points.values()), points=points)
    path.write_text(json.dumps(result))
    summary = import_run(out, root=course)
    assert summary.submissions_updated == 1 and summary.unchanged == imported["notebooks"] - 1
    with Gradebook(db(course), COURSE_ID) as gb:
        lifted = grade(gb, "cheat-skip-check", "check_qkv_projections")
        assert (lifted.auto_score, lifted.manual_score, lifted.needs_manual_grade) == (2, None, False)
        comment = gb.find_comment("qkv_projections", NOTEBOOK, ASSIGNMENT, "cheat-skip-check")
        assert comment.auto_comment is None
        assert gb.find_submission(ASSIGNMENT, "cheat-skip-check").score == sum(points.values())


@pytest.mark.slow
def test_command_line_imports_into_the_course(batch, imported, tmp_path, monkeypatch, capsys):
    """``python -m grader gradebook OUT`` in a course folder: what it says, twice."""
    course = scratch_course(tmp_path / "course")
    monkeypatch.setenv("COURSE_ROOT", str(course))
    assert main(["gradebook", str(batch["out"])]) == 0
    first = capsys.readouterr().out
    n, students = imported["notebooks"], len({student for student, _ in imported["csv"]})
    assert f"{n} new, 0 updated, 0 unchanged" in first and f"{students} student(s) added" in first
    assert "assignments added from solutions/: 10.1-self-attention" in first
    assert main(["gradebook", str(batch["out"])]) == 0
    assert f"0 new, 0 updated, {n} unchanged" in capsys.readouterr().out
    assert (course / "gradebook.db").is_file() and not (ROOT / "notebooks" / "gradebook.db").exists()


# ---------------------------------------------------------------- what cannot be imported


def manifest(out: Path, shard=(1, 1), keys=(("alice", ASSIGNMENT),)) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps({"shard": list(shard), "keys": [list(k) for k in keys],
                                                   "exercises": [], "options": {}}))
    return out


def test_a_shard_must_be_merged_first(tmp_path):
    """Is one shard of a sharded run refused, with the merge command to run?"""
    with pytest.raises(GradebookError, match=r"shard 2/4 only: merge the shards first"):
        import_run(manifest(tmp_path / "out", shard=(2, 4)), root=ROOT)


def test_an_unfinished_run_is_refused(tmp_path):
    """A run with submissions still ungraded, or no run at all: refused with what to do."""
    with pytest.raises(GradebookError, match="No result for 1 submission.*alice/10.1"):
        import_run(manifest(tmp_path / "out"), root=ROOT)
    with pytest.raises(GradebookError, match="has no manifest.json"):
        import_run(tmp_path / "nothing", root=ROOT)
    assert main(["gradebook", str(tmp_path / "nothing")]) == 1


# ---------------------------------------------------------------- one rule for rows not a grade yet


def one_of_each(out: Path) -> dict[str, str]:
    """A run of five rows, each graded notebook the instructor notebook itself (full points by
    nbgrader's autograder): ok, flagged, an error with points (a kernel that died late), an
    error with nothing graded, and a flagged row a person then reviews. Returns student ->
    what the row is."""
    from grader.autograde.host.submissions import read_assignment
    from grader.results import ERROR, FLAGGED, OK, Result, save_result

    exercises = dict(read_assignment(ROOT / "solutions" / ASSIGNMENT).exercises)
    kinds = {"ok": OK, "flagged": FLAGGED, "died": ERROR, "unreadable": ERROR, "reviewed": FLAGGED}
    for student, status in kinds.items():
        points = {} if student == "unreadable" else dict(exercises)
        flags = ["qkv_projections: outputs do not match"] if status == FLAGGED else []
        if flags:
            points["qkv_projections"] = 0.0
        save_result(out, Result(student, ASSIGNMENT, status=status, score=sum(points.values()),
                                max_score=sum(exercises.values()) if points else 0.0, points=points,
                                max_points=dict(exercises) if points else {}, flags=flags,
                                reason="kernel died" if status == ERROR else "", content_hash="h"))
        if points:
            graded = out / "autograded" / student / ASSIGNMENT
            graded.mkdir(parents=True)
            shutil.copy(ROOT / "solutions" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", graded)
    (out / "manifest.json").write_text(json.dumps({"shard": [1, 1], "exercises": list(exercises),
                                                   "keys": [[s, ASSIGNMENT] for s in kinds]}))
    return kinds


def test_nbgrader_export_and_grader_export_agree_on_rows_not_graded_yet(tmp_path, monkeypatch):
    """F4: flagged and error rows, and a student with no graded notebook, are empty in the
    course's ``nbgrader export`` (its plugin) and in ``grader export``; once a person reviews
    a flagged row (formgrader's manual grade; --include-flagged) both give its score."""
    from grader.export import export
    from grader.gradebook import CourseCsvExport
    from grader.paths import course_config_file

    monkeypatch.setenv("PATH", with_python_tools(dict(os.environ))["PATH"])
    out, course = tmp_path / "out", scratch_course(tmp_path / "course")
    kinds = one_of_each(out)
    import_run(out, root=course)
    assert course_config_file(course).ExportApp.plugin_class == "grader.gradebook.CourseCsvExport"
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,email\n" + "".join(f"{s},{s}@x.org\n" for s in kinds))

    def both(include_flagged=False) -> tuple[dict[str, str], dict[str, str]]:
        with Gradebook(db(course), COURSE_ID) as gb:
            CourseCsvExport(to=str(tmp_path / "nb.csv")).export(gb)
        ours = export(out, "moodle", roster, tmp_path / "ours.csv", include_flagged=include_flagged)
        theirs = {s: r["score"] for (s, _), r in csv_rows((tmp_path / "nb.csv").read_text()).items()}
        ours = {r["Email address"].split("@")[0]: r[ASSIGNMENT] for r in csv.DictReader(ours.path.open())}
        return ({s: v and float(v) for s, v in theirs.items()},  # 5.0 and 5: the same points
                {s: v and float(v) for s, v in ours.items()})

    theirs, ours = both()
    assert theirs == ours and {s for s, v in ours.items() if v} == {"ok"}, (theirs, ours)
    with Gradebook(db(course), COURSE_ID) as gb:  # the person's review, as formgrader saves it
        entered = grade(gb, "reviewed", "check_qkv_projections")
        entered.manual_score, entered.needs_manual_grade = 0.0, False
        gb.db.commit()
    theirs, ours = both(include_flagged=True)
    assert theirs["reviewed"] == ours["reviewed"] != "" and theirs["ok"] == ours["ok"] != ""
    assert theirs["flagged"] == "" and theirs["died"] == theirs["unreadable"] == ""
