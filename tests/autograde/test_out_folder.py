"""OUT and its one writer (grader/autograde/host/out_folder.py): grades.csv appended as results come,
sorted once at the end, and left whole enough by a crash for the rerun."""

from __future__ import annotations

import csv
import io

from grader.autograde.host.out_folder import Out
from grader.results import Result, csv_text, load_results


def result(student: str, score: float = 1.0) -> Result:
    return Result(student, "a", points={"x": score}, max_points={"x": 1.0}, score=score,
                  max_score=1.0, content_hash="h")


def students(path) -> list[str]:
    return [row["student_id"] for row in csv.DictReader(io.StringIO(path.read_text()))]


def test_rows_are_appended_then_sorted_once(tmp_path):
    """Does each result add a row as it completes (kept ones first), and does the finished
    file equal the sorted CSV of all results?"""
    out = Out(tmp_path, ["x"])
    kept = [result("b")]
    out.start(kept)
    out.record(result("c"))
    out.record(result("a", 0.0))
    assert students(out.csv) == ["b", "c", "a"]  # as they came
    everything = [*kept, result("c"), result("a", 0.0)]
    out.finish(everything)
    assert out.csv.read_text() == csv_text(everything, ["x"])
    assert students(out.csv) == ["a", "b", "c"]


def test_a_crash_leaves_every_saved_result_and_its_row(tmp_path):
    """Without finish (the process killed), does every recorded result have its JSON file and
    its row, for the rerun to resume from?"""
    out = Out(tmp_path, ["x"])
    out.start([])
    for name in ("b", "a"):
        out.record(result(name))
    del out  # no finish: as after SIGKILL, what was flushed is on disk
    assert set(load_results(tmp_path)) == {("a", "a"), ("b", "a")}
    assert sorted(students(tmp_path / "grades.csv")) == ["a", "b"]


def test_a_workers_pages_move_into_out(tmp_path):
    """Are the pages and graded notebooks a worker left in its outbox moved to OUT's folders
    of that student, replacing the old ones, and listed in the result?"""
    outbox = tmp_path / "outbox" / "s-1"
    (outbox / "feedback").mkdir(parents=True)
    (outbox / "autograded").mkdir()
    (outbox / "feedback" / "nb.html").write_text("<html>")
    (outbox / "autograded" / "nb.ipynb").write_text("{}")
    root = tmp_path / "out"
    (root / "feedback" / "s" / "a").mkdir(parents=True)
    (root / "feedback" / "s" / "a" / "old.html").write_text("old")
    out = Out(root, ["x"])
    out.start([])
    graded = result("s")
    out.record(graded, str(outbox))
    assert graded.feedback == ["feedback/s/a/nb.html"]
    assert sorted(p.name for p in (root / "feedback" / "s" / "a").iterdir()) == ["nb.html"]
    assert (root / "autograded" / "s" / "a" / "nb.ipynb").is_file() and not outbox.exists()
    assert load_results(root)[("s", "a")].feedback == ["feedback/s/a/nb.html"]
