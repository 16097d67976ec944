"""MarkDuplicates (grader/autograde/worker/preprocessors/mark_duplicates.py), no kernel."""

from __future__ import annotations

from grader.autograde.worker.preprocessors.cell_marks import MARK
from grader.autograde.worker.preprocessors.mark_duplicates import MarkDuplicates


def ids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_the_demoted_copy_is_marked(read_notebook, resources):
    """Of a grade cell that appears twice, is the earlier copy demoted to a plain cell and
    marked as a duplicate, the last one graded, and nothing else touched?"""
    nb, _ = MarkDuplicates().preprocess(read_notebook("submitted-grade-cell-twice.ipynb"), resources)
    assert ids(nb) == ["intro", "setup", "double", None, "check_double", "half", "check_half"]
    assert nb.cells[3].metadata[MARK] == {"duplicate_of": "check_double"}
    assert [c for c in nb.cells if MARK in c.metadata] == [nb.cells[3]]


def test_a_notebook_without_duplicates_is_unchanged(read_notebook, resources):
    """Does a notebook with unique grade ids come out as it went in?"""
    before = read_notebook("submitted-unchanged.ipynb")
    nb, _ = MarkDuplicates().preprocess(read_notebook("submitted-unchanged.ipynb"), resources)
    assert nb == before
