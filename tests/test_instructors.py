"""The instructor's tools without grading anything: the late policy (ours and nbgrader's
plugin), grades.csv's penalty columns, the LMS exports and their reports, Canvas's ids kept
from a zip, the course id as a setting, a gradebook's own files folder, and the errors
that say what to do (a shadowed ``course`` package, a release without --repository)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import late
from grader import results as report
from grader.__main__ import main
from grader.autograde.host.submissions import course_assignments, extract_zip, read_lms
from grader.errors import ExportError, GradebookError
from grader.export import export
from grader.gradebook import files_folder
from grader.paths import COURSE_ID, course_config_file, course_id
from tests.settings import ROOT

A = "10.1-self-attention"
POLICY = '''
c.AssignLatePenalties.plugin_class = "grader.late.SharePerPeriod"
c.SharePerPeriod.share = {share}
c.SharePerPeriod.period = "{period}"
c.SharePerPeriod.cap = {cap}
c.SharePerPeriod.grace_minutes = {grace}
'''


def course(folder: Path, settings: str = "") -> Path:
    """A course folder whose nbgrader_config.py holds ``settings`` (solutions/ linked)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "solutions").symlink_to(ROOT / "solutions")
    (folder / "nbgrader_config.py").write_text("c = get_config()\n" + settings)
    return folder


def policy(tmp_path: Path, share=0.1, period="hour", cap=0.5, grace=15) -> late.Policy:
    return late.load_policy(course(tmp_path / "c", POLICY.format(share=share, period=period, cap=cap,
                                                                   grace=grace)))


# ---------------------------------------------------------------- the late policy


def test_no_policy_no_penalty(tmp_path):
    """A course that sets nothing gets nbgrader's default plugin: no penalty, however late."""
    none = late.load_policy(course(tmp_path / "c"))
    assert late.penalty(none, "s", 4.0, 10 * 86400) == 0.0


@pytest.mark.parametrize(("minutes", "share"), [(0, 0.0), (15, 0.0), (16, 0.1), (60, 0.1), (61, 0.2),
                                                (91, 0.2), (24 * 60, 0.5)])
def test_share_per_started_hour_after_grace_up_to_the_cap(tmp_path, minutes, share):
    p = policy(tmp_path)
    assert late.penalty(p, "s", 4.0, minutes * 60) == pytest.approx(4.0 * share)


def test_per_day(tmp_path):
    p = policy(tmp_path, share=0.25, period="day", cap=1.0, grace=0)
    assert [late.penalty(p, "s", 2.0, h * 3600) for h in (1, 24, 25, 200)] == [0.5, 0.5, 1.0, 2.0]


def test_nbgraders_own_plugin_is_honoured(tmp_path):
    """``penalty_method = "zero"`` in the course's config: late work loses all its points."""
    p = late.load_policy(course(tmp_path / "c", 'c.LateSubmissionPlugin.penalty_method = "zero"\n'))
    assert late.penalty(p, "s", 3.0, 1.0) == 3.0 and late.penalty(p, "s", 3.0, 0.0) == 0.0


def test_a_broken_policy_says_where(tmp_path):
    with pytest.raises(Exception, match="AssignLatePenalties.plugin_class"):
        late.load_policy(course(tmp_path / "c", 'c.AssignLatePenalties.plugin_class = "no.such.Plugin"\n'))


def result(student, score=4.0, seconds_late=0.0, status=report.OK, **kwargs) -> report.Result:
    points = {"qkv_projections": min(score, 2.0), "QKVProjection": max(0.0, score - 2.0)}
    return report.Result(student, A, status=status, score=score, max_score=4.0, points=points,
                         max_points={"qkv_projections": 2.0, "QKVProjection": 2.0},
                         seconds_late=seconds_late, content_hash="h", **kwargs)


def test_grades_csv_keeps_the_raw_score_beside_the_penalised_one(tmp_path):
    rows = [result("ada"), result("bo", seconds_late=91 * 60)]
    late.apply(rows, policy(tmp_path))
    text = report.csv_text(rows, ["qkv_projections", "QKVProjection"])
    got = {r["student_id"]: (r["score"], r["raw_score"], r["late_penalty"], r["late"])
           for r in csv.DictReader(io.StringIO(text))}
    assert got == {"ada": ("4", "4", "0", "no"), "bo": ("3.2", "4", "0.8", "yes")}
    assert report.Result.from_json(rows[1].to_json()) == rows[1] and rows[1].sound()


# ---------------------------------------------------------------- Canvas zips


def test_canvas_zip_keeps_user_id_and_late_marker(tmp_path):
    archive = tmp_path / "submissions.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("doejane_late_1234_5678_self_attention.ipynb", "{}")
        zf.writestr("roebob_2345_6789_self_attention-1.ipynb", "{}")
    root = extract_zip(archive, tmp_path / "x", course_assignments(ROOT / "solutions"))
    lms = read_lms(root)
    assert lms[("doejane-1234", A)] | {"file": ""} == {
        "lms": "canvas", "user_id": "1234", "submission_id": "5678", "late": "yes", "name": "doejane",
        "file": ""}
    assert (lms[("roebob-2345", A)]["user_id"], lms[("roebob-2345", A)]["late"]) == ("2345", "no")
    assert (root / "doejane-1234" / A / "self_attention.ipynb").is_file()


# ---------------------------------------------------------------- export


def run_out(folder: Path, results: list[report.Result]) -> Path:
    for r in results:
        report.save_result(folder, r)
    (folder / "manifest.json").write_text(json.dumps({"shard": [1, 1], "keys": [list(r.key) for r in results],
                                                       "exercises": list(results[0].max_points)}))
    return folder


def canvas(student, user, **kwargs):
    ids = {"lms": "canvas", "user_id": user, "submission_id": "9", "late": "no"}
    return result(student, lms=ids, **kwargs)


def test_canvas_export_needs_no_roster_and_leaves_flagged_rows_empty(tmp_path):
    rows = [canvas("ada", "11"), canvas("bo", "12", score=2.0, status=report.FLAGGED, flags=["x"]),
            canvas("cy", "13", score=3.0)]
    rows[2].late_penalty = 0.5
    out = run_out(tmp_path, rows)
    summary = export(out, "canvas")
    assert summary.path.read_text() == ("Student,ID,SIS User ID,SIS Login ID,Section,10.1-self-attention\n"
                                        "Points Possible,,,,,4\nada,11,,,,4\nbo,12,,,,\ncy,13,,,,2.5\n")
    assert "flagged, left empty" in summary.text() and "bo/10.1-self-attention" in summary.text()
    export(out, "canvas", include_flagged=True)
    assert "bo,12,,,,2\n" in summary.path.read_text()


def test_ungradable_rows_are_exported_empty_and_listed(tmp_path):
    """A submission that could not be graded (misnamed, missing) is no grade: its LMS cell is
    empty, not 0, and the export lists it with the reason."""
    why = "found Untitled.ipynb, Untitled1.ipynb instead of self_attention.ipynb"
    rows = [canvas("ada", "11"), canvas("bo", "12", score=0.0, status=report.ERROR, reason=why)]
    summary = export(run_out(tmp_path, rows), "canvas")
    assert summary.path.read_text().splitlines()[-1] == "bo,12,,,,"
    assert "not gradable, left empty (1): bo/10.1-self-attention (found Untitled.ipynb" in summary.text()


def test_canvas_export_without_ids_stops(tmp_path):
    out = run_out(tmp_path, [result("ada")])
    with pytest.raises(ExportError, match="canvas_id"):
        export(out, "canvas")


def test_moodle_export_reports_who_is_missing(tmp_path):
    out = run_out(tmp_path / "out", [result("ada"), result("bo", score=1.0)])
    roster = tmp_path / "roster.csv"
    roster.write_text("Student ID,First name,Last name,Email\nada,Ada,L,ada@x.org\ngus,Gus,G,gus@x.org\n")
    summary = export(out, "moodle", roster)
    assert summary.path.read_text() == ("First name,Last name,ID number,Email address,10.1-self-attention\n"
                                        "Ada,L,,ada@x.org,4\nGus,G,,gus@x.org,\n")
    assert summary.not_in_roster == ["bo"] and summary.no_submission == ["gus"]
    assert "NOT EXPORTED, not in the roster (1): bo" in summary.text()
    with pytest.raises(ExportError, match="--roster"):
        export(out, "moodle")


# ---------------------------------------------------------------- settings and errors


def test_course_id_is_a_setting(tmp_path):
    assert course_id(course(tmp_path / "a")) == COURSE_ID
    mine = course(tmp_path / "b", 'c.CourseDirectory.course_id = "transformer-2027"\n')
    assert course_id(mine) == "transformer-2027"
    assert course_config_file(mine).ClearSolutions.text_stub == "YOUR ANSWER HERE"  # grader's settings kept


def test_each_gradebook_its_own_files(tmp_path):
    assert files_folder(tmp_path, None) == tmp_path
    assert files_folder(tmp_path, f"sqlite:///{tmp_path}/gradebook.db") == tmp_path
    assert files_folder(tmp_path, f"sqlite:///{tmp_path}/other/gb.db") == tmp_path / "other"
    with pytest.raises(GradebookError, match="SQLite"):
        files_folder(tmp_path, "postgresql://host/db")


@pytest.mark.slow  # a fresh Python, started where the clone shadows the package
def test_shadowed_course_package_says_what_to_do(tmp_path):
    """A clone named ``course`` in the folder Python runs from hides the helpers: the
    command stops with the reason and the way out, not a TypeError."""
    (tmp_path / "course" / "solutions").mkdir(parents=True)  # the clone: a folder, no __init__.py
    done = subprocess.run([sys.executable, "-m", "grader", "autograde", "nowhere", "--out", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COURSE_ROOT": str(ROOT)})
    assert done.returncode == 1, done.stderr
    assert "run from inside the clone" in done.stderr and "Traceback" not in done.stderr


def test_release_without_repository_stops(tmp_path, capsys):
    assert main(["student-bundle", str(tmp_path / "release"), "--through", "10.1"]) == 2
    assert "--repository OWNER/NAME is required" in capsys.readouterr().err
    assert not (tmp_path / "release").exists()


# ---------------------------------------------------------------- pages and the report


def test_feedback_page_needs_no_network():
    """The CDN script goes; formulas become text with Unicode and sub/superscripts; code and
    prices keep their dollar signs."""
    from grader.autograde.host.pages import offline

    page = ('<html><head><!-- Load mathjax -->\n<script src="https://cdnjs.cloudflare.com/x.js"> </script>'
            "\n<!-- End of mathjax configuration --></head><body><p>Scale by $\\sqrt{d_k}$: "
            "$$X \\in \\mathbb{R}^{n \\times d}$$ costs $5 and $6</p><pre>echo $HOME $x$</pre></body></html>")
    got = offline(page)
    assert "cdnjs" not in got and "<script" not in got
    assert '<span class="math">√d<sub>k</sub></span>' in got
    assert '<div class="math display">X ∈ ℝ<sup>n × d</sup></div>' in got
    assert "costs $5 and $6" in got and "<pre>echo $HOME $x$</pre>" in got


def test_report_counts_a_test_that_never_ran():
    """A row short of full marks whose check never failed (a syntax error before it) is
    counted under the exercise as "did not run": partial + zero = the rows explained."""
    from grader.report.summary import summarize

    failed = result("ada", score=2.0, outcomes={"qkv_projections": "passed", "QKVProjection": "failed"})
    broken = result("bo", score=2.0, outcomes={"qkv_projections": "passed"})  # no record: never ran
    (summary,) = summarize([failed, broken])
    module = next(e for e in summary.exercises if e.name == "QKVProjection")
    assert module.unnamed == ["ada"] and module.did_not_run == ["bo"]
    assert module.short_of_full == len(module.unnamed) + len(module.did_not_run) == 2


def test_late_penalty_line_on_the_page(tmp_path):
    from grader.autograde.host.pages import late_note

    r = result("bo", seconds_late=91 * 60)
    late.apply([r], policy(tmp_path))
    assert "0.8 point(s) taken. Score: 3.2 / 4 (before the penalty 4)" in late_note(r)
    assert "submitted 1.5 h after the deadline; 0.8 point(s) taken" in late_note(r)
    assert late_note(result("ada")) == ""


def test_lateness_is_a_field_the_feedback_box_reads():
    """Is a late submission said from its seconds_late (the grader's note box on the page, the
    late and seconds_late columns), not a note in its reason?"""
    from grader.autograde.worker.feedback_note import note_html

    r = report.settle(result("bo", seconds_late=91 * 60))
    assert r.reason == "" and r.lateness == "submitted 1.5 h after the deadline"
    assert "<li>submitted 1.5 h after the deadline</li>" in note_html(r)
    row = report.csv_rows([r], []).split(",")
    assert row[row.index("ok") + 1:row.index("ok") + 5] == ["", "", "5460", "yes"]
    assert note_html(report.settle(result("ada"))) == "" and result("ada").lateness == ""


def test_regrade_of_an_unknown_student_stops_before_anything(tmp_path):
    from grader.errors import UsageError
    from grader.regrade import regrade

    out = run_out(tmp_path, [result("ada")])
    with pytest.raises(UsageError, match="no result for zed"):
        regrade(tmp_path / "submitted", out, ["zed"])
    assert not (out / "previous").exists()
