"""The second run into an output folder loses no one (issue 43): a regrade from a zip of one
student's fixed file, a later download that lacks a student graded before, the files of a
batch that belong to no student, Moodle rosters by participant id. Canvas and Moodle zips
are built as in tests/test_lms_batch.py; grading itself is replaced by a stand-in (no kernel
runs here: what grading gives each notebook is tests/test_autograde.py's), everything
around it (OUT, grades.csv, the report, the export, regrade's bookkeeping) is the real one."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader.autograde.host import run as run_module
from grader.autograde.host.options import Options
from grader.autograde.host.out_folder import NOT_GRADED
from grader.autograde.host.run import autograde
from grader.export import export, feedback_bundles
from grader.gradebook import import_run
from grader.regrade import regrade
from grader.results import Result, load_results
from samples import ROOT, notebook_path
from tests.test_gradebook_import import scratch_course

A = "10.1-self-attention"
NB = notebook_path(A, "notebooks").read_text()


def notebook(fixed: bool = False) -> str:
    """The learner notebook; ``fixed`` marks the stand-in grader's full marks."""
    nb = nbformat.reads(NB, as_version=4)
    nb.metadata["test_fixed"] = fixed
    return nbformat.writes(nb)


def fake_grade_all(gradable, assignments, digests, options, out, work, run) -> dict:
    """Grading without kernels: 4 points for a notebook marked fixed, 2 for any other, and a
    feedback page left in the outbox as a worker leaves it."""
    for sub in gradable:
        fixed = nbformat.read(sub.folder / sub.files[0], as_version=4).metadata.get("test_fixed")
        score = 4.0 if fixed else 2.0
        outbox = work / "outbox" / sub.student
        (outbox / "feedback").mkdir(parents=True)
        (outbox / "feedback" / "self_attention.html").write_text(f"<html>{sub.student}: {score}</html>")
        run.record(Result(sub.student, sub.assignment, score=score, max_score=4.0,
                          points={"qkv_projections": 2.0, "QKVProjection": score - 2.0},
                          max_points={"qkv_projections": 2.0, "QKVProjection": 2.0},
                          content_hash=digests[sub.key]), str(outbox))
    return {"files": "stand-in"}


#: Per LMS: the file name of each student's notebook in its zip, and her student id.
CANVAS = {"ann": ("ann_11_1_self_attention.ipynb", "ann-11"), "bo": ("bo_12_2_self_attention.ipynb", "bo-12"),
          "cy": ("cy_late_13_3_self_attention.ipynb", "cy-13")}
MOODLE = {"ann": ("Ann Ek_116_assignsubmission_file_/self_attention.ipynb", "annek-116"),
          "bo": ("Bo Ek_117_assignsubmission_file_/self_attention.ipynb", "boek-117"),
          "cy": ("Zoë Ñúñez-Çelik_118_assignsubmission_file_/self_attention.ipynb", "zoezelik-118")}
LMS = {"canvas": CANVAS, "moodle": MOODLE}
#: A file of nobody's, and the archiver's own.
STRAYS = {"self_attention.ipynb": "neither", "__MACOSX/._self_attention.ipynb": "archiver"}


def lms_zip(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def roster(tmp_path: Path) -> Path:
    """Moodle's grading worksheet as the roster: participant ids, no student_id column."""
    path = tmp_path / "worksheet.csv"
    path.write_text("Identifier,Full name,Email address\nParticipant 116,Ann Ek,ann@x.org\n"
                    "Participant 117,Bo Ek,bo@x.org\nParticipant 118,Zoë Ñúñez-Çelik,zoe@x.org\n",
                    encoding="utf-8")
    return path


def rows(path: Path) -> dict[str, dict[str, str]]:
    return {r["student_id"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


def exported(tmp_path: Path, out: Path, lms: str):
    summary = export(out, lms, roster(tmp_path) if lms == "moodle" else None)
    lines = summary.path.read_text(encoding="utf-8").splitlines()
    return summary, lines[2 if lms == "canvas" else 1:]


@pytest.fixture(params=sorted(LMS))
def term(request, tmp_path, monkeypatch):
    """The class graded from the LMS's zip (with two stray files), as a stand-in grades it."""
    monkeypatch.setattr(run_module, "grade_all", fake_grade_all)
    monkeypatch.setenv("COURSE_ROOT", str(ROOT))
    lms, files = request.param, LMS[request.param]
    first = lms_zip(tmp_path / "all.zip", {**{f: notebook() for f, _ in files.values()},
                                           **dict.fromkeys(STRAYS, NB)})
    out = tmp_path / "out"
    summary = autograde(first, out, Options(solutions=ROOT / "solutions", progress=False))
    return {"lms": lms, "files": files, "out": out, "first": first, "summary": summary,
            "ids": {k: v for k, (_, v) in files.items()}}


def test_a_regrade_from_one_file_changes_that_student_only(term, tmp_path):
    """F9: the zip of bo's fixed file regrades bo; every other row of grades.csv, of the report
    and of the export is what it was."""
    out, ids = term["out"], term["ids"]
    before = (out / "grades.csv").read_text()
    summary, lines_before = exported(tmp_path, out, term["lms"])
    assert summary.rows == 3
    fix = lms_zip(tmp_path / "fix.zip", {term["files"]["bo"][0]: notebook(fixed=True)})
    done = regrade(fix, out, [ids["bo"]], Options(solutions=ROOT / "solutions", progress=False))
    assert done.changes == [f"{ids['bo']}/{A}: 2 (ok) -> 4 (ok)"]
    after = rows(out / "grades.csv")
    assert {s: r for s, r in after.items() if s != ids["bo"]} == \
        {s: r for s, r in rows_of(before).items() if s != ids["bo"]}
    assert after[ids["bo"]]["score"] == "4" and set(after) == set(ids.values())
    summary, lines = exported(tmp_path, out, term["lms"])
    assert summary.rows == 3 and len(lines) == 3
    bo = [line for line in lines_before if "bo" in line.lower()]
    assert [line for line in lines if line not in lines_before] == [line.replace(",2", ",4") for line in bo]
    assert "3 rows (1 assignment(s))" in (out / "report.html").read_text()
    assert json.loads((out / "manifest.json").read_text())["kept"] == sorted(
        [s, A] for s in ids.values() if s != ids["bo"])


def rows_of(text: str) -> dict[str, dict[str, str]]:
    return {r["student_id"]: r for r in csv.DictReader(io.StringIO(text))}


def test_a_later_download_without_a_student_keeps_her_row_marked(term, tmp_path):
    """F8: a newer download lacking cy keeps cy's row (in_batch: no), says so loudly on the
    terminal, in the report and in the export, which keeps her grade; when she is back the
    mark goes."""
    out, ids, files = term["out"], term["ids"], term["files"]
    later = lms_zip(tmp_path / "later.zip", {files[s][0]: notebook() for s in ("ann", "bo")})
    summary = autograde(later, out, Options(solutions=ROOT / "solutions", progress=False))
    cy = ids["cy"]
    said = summary.text()
    assert "NOT IN THIS BATCH, earlier rows kept (in_batch: no) (1)" in said and f"{cy}/{A}" in said
    got = rows(out / "grades.csv")
    assert set(got) == set(ids.values()) and got[cy]["in_batch"] == "no" and got[cy]["score"] == "2"
    assert {got[s]["in_batch"] for s in got if s != cy} == {"yes"}
    report = (out / "report.html").read_text()
    assert "Not in the latest batch, kept" in report and f">{cy}<" in report.split('id="kept"')[1]
    export_summary, lines = exported(tmp_path, out, term["lms"])
    assert export_summary.rows == 3 and any(line.endswith(",2") and ("13" in line or "zoe" in line)
                                            for line in lines)
    assert "NOT IN THE LATEST BATCH, exported with the grade of an earlier one (1)" in export_summary.text()
    imported = import_run(out, root=scratch_course(tmp_path / "course"))
    said = imported.text()
    assert f"NOT IN THE LATEST BATCH, imported with the grade of an earlier one (1): {cy}/{A}" in said
    back = autograde(term["first"], out, Options(solutions=ROOT / "solutions", progress=False))
    assert not back.absent and rows(out / "grades.csv")[cy]["in_batch"] == "yes"
    assert not load_results(out)[(cy, A)].missing_from


def test_every_run_lists_what_it_did_not_grade_in_out(term, tmp_path):
    """F1, F2: the stray notebook and the __MACOSX entry are in OUT/not-graded.csv, which the
    terminal, the report and the export name; a second batch adds its own without losing the
    first's."""
    out = term["out"]
    listed = list(csv.DictReader((out / NOT_GRADED).open()))
    assert {r["file"] for r in listed} == set(STRAYS)
    assert next(r for r in listed if r["file"].startswith("__MACOSX"))["why"].startswith("the archiver's")
    assert str(out / NOT_GRADED) in term["summary"].text()
    assert "NOT GRADED: files that belong to no student (2" in (out / "report.html").read_text()
    summary, _ = exported(tmp_path, out, term["lms"])
    assert f"2 file(s) of the batches belong to no student, listed in {out / NOT_GRADED}" in summary.text()
    other = lms_zip(tmp_path / "other.zip", {term["files"]["ann"][0]: notebook(), "notes.txt": "x"})
    autograde(other, out, Options(solutions=ROOT / "solutions", progress=False))
    listed = list(csv.DictReader((out / NOT_GRADED).open()))
    assert {(Path(r["batch"]).name, r["file"]) for r in listed} == {
        *(("all.zip", f) for f in STRAYS), ("other.zip", "notes.txt")}


@pytest.mark.parametrize("term", ["moodle"], indirect=True)
def test_moodle_roster_by_participant_id(term, tmp_path):
    """F3: Moodle's grading worksheet is the roster: matched by participant id, so a name whose
    letters the student id drops (Zoë Ñúñez-Çelik) still gets her grade and her e-mail."""
    summary, lines = exported(tmp_path, term["out"], "moodle")
    assert lines == ["Ann,Ek,,ann@x.org,2", "Bo,Ek,,bo@x.org,2", "Zoë,Ñúñez-Çelik,,zoe@x.org,2"]
    assert not summary.not_in_roster and not summary.no_submission


def test_a_learner_cannot_print_the_host_into_her_feedback(tmp_path, monkeypatch):
    """F7: whatever a learner's cell prints of the grading environment (PATH, PYTHONPATH,
    sys.prefix, a traceback's files, OUT) reaches her page as [grading host], the rest as it was."""
    from grader.autograde.host.out_folder import Out
    from grader.autograde.sandbox.config import kernel_env

    monkeypatch.setenv("COURSE_ROOT", str(ROOT))
    env = kernel_env(tmp_path / "home", tmp_path / "records", 1)
    printed = "\n".join([f"{k}={v}" for k, v in env.items()] + [sys.prefix, str(ROOT / "grader" / "x.py"),
                                                                   str(tmp_path / "out"), "/usr/bin/python3"])
    outbox = tmp_path / "outbox"
    (outbox / "feedback").mkdir(parents=True)
    (outbox / "feedback" / "nb.html").write_text(f"<html><body><pre>{printed}</pre></body></html>")
    out = Out(tmp_path / "out", ["x"])
    result = Result("ann", A, content_hash="h")
    out.publish(result, outbox)
    page = (tmp_path / "out" / result.feedback[0]).read_text()
    for secret in (sys.prefix, str(ROOT), str(tmp_path / "out"), os.path.dirname(sys.executable)):
        assert secret not in page, secret
    assert "[grading host]/grader/x.py" in page and "/usr/bin/python3" in page


def test_kernels_drop_to_nobody_only_where_it_can_read_python(monkeypatch, tmp_path):
    """The shared-host note (docs/grading.md): as root, kernels run as the sandbox user only if
    it can read the course's Python; under a private home they run as the grader's user, and
    the summary says why and what to do."""
    from grader.autograde.host import sandbox
    from grader.autograde.sandbox.config import Limits, SandboxConfig

    shared = Path(tempfile.mkdtemp(dir="/tmp"))
    private = tmp_path / "home" / "python"
    try:
        for folder, mode in ((shared, 0o755), (private.parent, 0o700)):
            folder.mkdir(parents=True, exist_ok=True)
            folder.chmod(mode)
            (folder / "python").touch()
            (folder / "python").chmod(0o755)
        monkeypatch.setattr(sandbox, "sandbox_user", lambda config: (65534, 65534))
        owner = private.parent.stat().st_uid
        assert owner != 65534 or os.geteuid() != 0
        config = SandboxConfig(Limits(), user="nobody")
        monkeypatch.setattr(sandbox, "required_paths", lambda: [private])
        dropped, said = sandbox.resolve_user(config)
        assert dropped.user is None and "cannot read" in said and "outside a private home" in said
        monkeypatch.setattr(sandbox, "required_paths", lambda: [shared / "python"])
        kept, said = sandbox.resolve_user(config)
        assert kept.user == "nobody" and said == "kernels run as nobody"
    finally:
        shutil.rmtree(shared)


@pytest.mark.parametrize("term", ["canvas", "moodle"], indirect=True)
def test_feedback_bulk_zip_for_the_lms_and_who_gets_none(term, tmp_path):
    """F5, F6: the feedback command writes the LMS's bulk-upload zip (Canvas's file names,
    Moodle's participant folders) and names the students it has no page for."""
    out, files, lms = term["out"], term["files"], term["lms"]
    broken = {"canvas": "dee_14_4_self_attention.ipynb",
              "moodle": "Dee Ek_119_assignsubmission_file_/self_attention.ipynb"}[lms]
    batch = lms_zip(tmp_path / "more.zip", {**{f: notebook() for f, _ in files.values()}, broken: "not json"})
    autograde(batch, out, Options(solutions=ROOT / "solutions", progress=False))
    done = feedback_bundles(out)
    dee = {"canvas": "dee-14", "moodle": "deeek-119"}[lms]
    assert done.no_feedback == [f"{dee}/{A} ({rows(out / 'grades.csv')[dee]['reason']})"]
    assert "NO FEEDBACK PAGE, nothing to send (1): " in done.text() and "not a valid notebook" in done.text()
    with zipfile.ZipFile(out / "feedback-bundles" / f"{lms}-{A}.zip") as zf:
        names = sorted(zf.namelist())
    if lms == "canvas":
        assert names == ["ann_11_1_self_attention.html", "bo_12_2_self_attention.html",
                         "cy_late_13_3_self_attention.html"]
    else:
        assert names == sorted(f.rsplit("/", 1)[0] + "/self_attention.html" for f, _ in files.values())


def test_a_merge_keeps_the_rows_its_shards_kept(tmp_path):
    """Shards graded into folders that held a student the new batch lacks: the merged
    grades.csv, manifest and export keep her row, marked."""
    from grader.gradebook import read_run
    from grader.merge import merge
    from grader.results import save_result

    def row(student: str, missing_from: str = "") -> Result:
        return Result(student, A, score=2.0, max_score=2.0, points={"qkv_projections": 2.0},
                      max_points={"qkv_projections": 2.0}, content_hash="h", missing_from=missing_from)

    keys = [["ann", A], ["bo", A]]
    outs = [tmp_path / "s1", tmp_path / "s2"]
    for k, (out, student) in enumerate(zip(outs, ("ann", "bo")), start=1):
        save_result(out, row(student))
        kept = [["cy", A]] if k == 1 else []
        (out / "manifest.json").write_text(json.dumps({"shard": [k, 2], "keys": keys, "kept": kept,
                                                       "exercises": ["qkv_projections"]}))
    save_result(outs[0], row("cy", "later.zip"))
    merge(outs, tmp_path / "merged")
    got = rows(tmp_path / "merged" / "grades.csv")
    assert {s: r["in_batch"] for s, r in got.items()} == {"ann": "yes", "bo": "yes", "cy": "no"}
    assert [r.student_id for r in read_run(tmp_path / "merged")[1]] == ["ann", "bo", "cy"]
