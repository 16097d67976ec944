"""The class report (grader/report/): exact counts from hand-made results (fast), then the
report of the planted batch, and shards merged into the same report as one run (slow)."""

from __future__ import annotations

import csv
import io
import re

import pytest

from grader import results as report
from grader.__main__ import main
from grader.report import report_out, write_report
from grader.report.summary import COLUMNS, csv_text, summarize, to_review
from grader.results import ERROR, FLAGGED, OK, Result

A, B = "10.1-self-attention", "10.2-scaled-dot-product-attention"
K_FROM_Q = {"name": "k_from_q", "description": "K computed with W_q"}
SWAPPED = {"name": "swapped", "description": "W_q and W_k swapped (Q computed with W_k)"}
MAX = {"qkv_projections": 2.0, "QKVProjection": 2.0}


def row(student: str, qkv: float = 2, module: float = 2, assignment: str = A, **kwargs) -> Result:
    points = {"qkv_projections": float(qkv), "QKVProjection": float(module)}
    return Result(student, assignment, points=points, max_points=dict(MAX), score=qkv + module,
                  max_score=4.0, content_hash="h", elapsed_s=kwargs.pop("elapsed_s", 3.0), **kwargs)


def hand_made() -> list[Result]:
    failed = {"qkv_projections": "failed", "QKVProjection": "passed"}
    return [
        row("ada", outcomes={"qkv_projections": "passed", "QKVProjection": "passed"}),
        row("bo", 0, outcomes=failed, mistakes={"qkv_projections": K_FROM_Q}),
        row("cy", 0, 0, outcomes={"qkv_projections": "failed", "QKVProjection": "failed"},
            mistakes={"qkv_projections": K_FROM_Q}, seconds_late=600.0),
        row("<dee>", 0, 1, outcomes={"qkv_projections": "not attempted"}, status=FLAGGED,
            reason="qkv_projections: calls torch.nn.functional.linear", feedback=["feedback/x/y.html"]),
        Result("eve", A, status=ERROR, reason="self_attention.ipynb is not a valid notebook",
               content_hash="h"),
        Result("fay", A, status=ERROR, reason="no submission", content_hash="h", submitted=False),
        row("gus", 0, outcomes=failed, mistakes={"qkv_projections": SWAPPED}),
        row("hal", 0, outcomes=failed, status=ERROR, retry=True, reason="the grader failed: OSError",
            mistakes={"qkv_projections": {"name": "k_from_q", "description": "<script>alert(1)</script>"}}),
        row("ada", assignment=B),
    ]


def test_counts_are_exact():
    first, second = summarize(hand_made(), ["qkv_projections", "QKVProjection"])
    assert (first.name, second.name) == (A, B)
    assert (first.students, first.submitted, first.graded) == (8, 7, 6)
    assert first.status == {OK: ["ada", "bo", "cy", "gus"], FLAGGED: ["<dee>"], ERROR: ["eve", "fay", "hal"],
                            "late": ["cy"]}
    assert sorted(first.scores) == [0, 1, 2, 2, 2, 4] and first.max_score == 4
    qkv, module = first.exercises
    assert qkv.name == "qkv_projections"
    assert qkv.shares == {"full marks": ["ada"], "partial": [], "zero": ["bo", "cy", "gus", "hal"],
                          "not attempted": ["<dee>"]}
    assert [(m.name, m.description, m.students) for m in qkv.mistakes] == [
        ("k_from_q", "K computed with W_q", ["bo", "cy", "hal"]),
        ("swapped", "W_q and W_k swapped (Q computed with W_k)", ["gus"])]
    assert module.shares["partial"] == ["<dee>"] and module.shares["zero"] == ["cy"]
    assert module.mistakes == [] and module.unnamed == ["cy"]
    assert [r.student_id for r in to_review(hand_made())] == ["<dee>", "hal", "eve", "fay"]


def test_csv_columns_and_rows():
    rows = list(csv.DictReader(io.StringIO(csv_text(summarize(hand_made())))))
    assert list(rows[0]) == COLUMNS
    by = {(r["assignment"], r["exercise"], r["measure"], r["name"]): r for r in rows}
    assert by[(A, "", "submitted", "")]["count"] == "7"
    assert by[(A, "", "flagged", "")]["students"] == "<dee>"
    assert by[(A, "", "score", "2")]["count"] == "3"
    mistake = by[(A, "qkv_projections", "mistake", "k_from_q")]
    assert (mistake["count"], mistake["share"], mistake["students"]) == ("3", "0.500", "bo cy hal")
    assert by[(A, "QKVProjection", "no mistake named", "")]["students"] == "cy"
    assert by[(B, "qkv_projections", "full marks", "")]["count"] == "1"


def test_page_is_self_contained_and_escaped(tmp_path):
    path = write_report(tmp_path, hand_made(), list(MAX))
    html = path.read_text()
    for section in ('id="review"', 'id="time"', f'id="{A}"', f'id="{B}"', "Mistakes, most frequent first"):
        assert section in html
    assert html.index("K computed with W_q") < html.index("W_q and W_k swapped")  # most frequent first
    assert html.count('src="data:image/png;base64,') == 5  # 2 per assignment, 1 of the times
    assert not re.search(r"<script|<link|src=\"(?!data:)|url\(", html)
    assert "&lt;dee&gt;" in html and "<dee>" not in html
    assert "&lt;script&gt;alert(1)" not in html  # the first description of k_from_q is kept
    assert '<a href="feedback/x/y.html">&lt;dee&gt;</a>' in html
    assert (tmp_path / "report.csv").read_text() == csv_text(summarize(hand_made(), list(MAX)))


def test_same_results_same_report(tmp_path):
    """No date, no path: the same results write the same bytes (merge relies on it)."""
    write_report(tmp_path / "a", hand_made())
    write_report(tmp_path / "b", list(reversed(hand_made())))
    for name in ("report.html", "report.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_report_command_and_old_results(tmp_path, capsys):
    """``python -m grader report OUT`` reads OUT/results; files written before outcomes and
    mistakes were recorded still load (as rows with no outcomes)."""
    old = row("old").to_json().replace('"mistakes": {},', "").replace('"outcomes": {},', "")
    assert "outcomes" not in old and Result.from_json(old) == row("old")
    (tmp_path / "results" / "old").mkdir(parents=True)
    (tmp_path / "results" / "old" / f"{A}.json").write_text(old)
    for r in hand_made():
        assert Result.from_json(r.to_json()) == r
        report.save_result(tmp_path, r)
    assert main(["report", str(tmp_path)]) == 0
    assert "report.html" in capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO((tmp_path / "report.csv").read_text())))
    assert [r["count"] for r in rows if r["measure"] == "students" and r["assignment"] == A] == ["9"]
    assert report_out(tmp_path).is_file()
    assert main(["report", str(tmp_path / "nowhere")]) == 2


# ---------------------------------------------------------------- the planted batch


def report_rows(out) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / "report.csv").read_text())))


def without_times(html: str) -> str:
    return re.sub(r'<section id="time">.*?</section>', "", html, flags=re.S)


#: Each planted bug a check names, under its own mistake: (exercise, mistake) -> students.
PLANTED_MISTAKES = {
    ("qkv_projections", "k_from_q"): "test-deleted test-stripped wrong-qkv",  # X @ W_q for K
    ("QKVProjection", "k_from_w_q"): "test-edited",  # self.w_q(x) for K
}


@pytest.mark.slow
def test_planted_batch_report(batch):
    """Are the report's counts those the planted catalogue says (tests/test_autograde.py's
    EXPECTED: points and status per student), and is each planted bug under its mistake?"""
    from tests.test_autograde import EXPECTED

    rows = report_rows(batch["out"])
    counts = {(r["exercise"], r["measure"], r["name"]): r for r in rows}

    def students(exercise: str, measure: str, name: str = "") -> list[str]:
        found = counts.get((exercise, measure, name))
        return found["students"].split() if found else []

    graded = {s: e for s, e in EXPECTED.items() if e[0] is not None}
    assert counts[("", "students", "")]["count"] == str(len(EXPECTED))
    assert counts[("", "submitted", "")]["count"] == str(len(EXPECTED) - 1)  # empty-student
    assert counts[("", "graded", "")]["count"] == str(len(graded))
    for status in (OK, FLAGGED, ERROR):
        assert students("", status) == sorted(s for s, e in EXPECTED.items() if e[2] == status), status
    assert students("", "late") == ["late"]
    for index, exercise in enumerate(["qkv_projections", "QKVProjection"]):
        assert students(exercise, "full marks") == sorted(s for s, e in graded.items() if e[index] == 2)
        assert students(exercise, "zero") == sorted(s for s, e in graded.items() if e[index] == 0)
        assert students(exercise, "partial") == students(exercise, "not attempted") == []
    named = {(r["exercise"], r["name"]): r["students"] for r in rows if r["measure"] == "mistake"}
    assert named == PLANTED_MISTAKES
    html = (batch["out"] / "report.html").read_text()
    assert "K computed with W_q" in html and "K computed with w_q" in html


@pytest.mark.slow
def test_merged_shards_give_the_report_of_one_run(batch, tmp_path, cache):
    """Do two shards merged write the report that one run over the same submissions gives
    (the batch's results of those students), but for the grading times?"""
    from grader.autograde.host.options import Options
    from grader.autograde.host.run import autograde
    from grader.merge import merge
    from tests.settings import GRADING
    from tests.submissions import planted

    names = ["wrong-qkv", "test-edited", "invalid-json", "empty-student"]
    root = planted.build(tmp_path / "subs", names)
    outs = [tmp_path / f"shard{k}" for k in (1, 2)]
    for k, out in enumerate(outs, 1):
        autograde(root, out, Options(jobs=1, shard=(k, 2), cache=cache, **GRADING))
        assert (out / "report.html").is_file()
    merge(outs, tmp_path / "merged")
    one = [r for r in batch["results"].values() if r.student_id in names]
    write_report(tmp_path / "one", one, ["qkv_projections", "QKVProjection"])
    merged, single = (tmp_path / d for d in ("merged", "one"))
    assert (merged / "report.csv").read_text() == (single / "report.csv").read_text()
    pages = [without_times((d / "report.html").read_text()) for d in (merged, single)]
    assert pages[0] == pages[1]
    named = {(r["exercise"], r["name"]): r["students"] for r in report_rows(merged)
             if r["measure"] == "mistake"}
    assert named == {("qkv_projections", "k_from_q"): "wrong-qkv",
                     ("QKVProjection", "k_from_w_q"): "test-edited"}
    assert 'id="time"' in (merged / "report.html").read_text()
