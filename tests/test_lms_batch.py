"""An instructor's LMS batch, file by file: every file ends as a graded row, a flagged row or a
listed file; each student is the LMS's id, never a display name (issue: nothing lost between
the LMS and the gradebook). No kernel runs here: what grading does with each row is
tests/test_autograde.py's."""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader.autograde.host.submissions import (
    course_assignments,
    discover,
    extract_zip,
    read_lms,
    read_unplaced,
)
from samples import ROOT, notebook_path

A, B = "10.1-self-attention", "10.2-scaled-dot-product-attention"
NB = notebook_path(A, "notebooks").read_bytes()
OTHER = notebook_path(B, "notebooks").read_bytes()  # 10.2's notebook

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
