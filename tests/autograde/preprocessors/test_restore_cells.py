"""RestoreCells (grader/autograde/worker/preprocessors/restore_cells.py), no kernel: the
gradebook holds the source as nbgrader records it, as in nbgrader's test_overwritecells."""

from __future__ import annotations

import pytest

from grader.autograde.worker.preprocessors.cell_marks import MARK
from grader.autograde.worker.preprocessors.restore_cells import RestoreCells, as_released


@pytest.fixture()
def resources(resources, source_notebook):
    return {**resources, "source_notebook": source_notebook}


def restore(nb, resources):
    preprocessor = RestoreCells(source_notebook=resources["source_notebook"])
    nb, _ = preprocessor.preprocess(nb, resources)
    return nb


def grade_ids(nb) -> list:
    return [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]


def test_a_deleted_grade_cell_is_put_back_in_its_place(read_notebook, resources):
    """Is a deleted test cell inserted after the nearest earlier instructor cell, with the
    hidden tests restored and a note saying so?"""
    nb = restore(read_notebook("submitted-grade-cell-deleted.ipynb"), resources)
    assert grade_ids(nb) == ["intro", "setup", "double", "check_double", "half", "check_half"]
    restored = nb.cells[3]
    assert "### BEGIN HIDDEN TESTS" in restored.source and "put it back" in restored.source
    assert restored.metadata["nbgrader"]["points"] == 2


def test_stripped_and_edited_metadata_are_repaired(read_notebook, resources):
    """Does a test cell that lost its metadata come back graded (not twice), and does an
    edited points value go back to the source's?"""
    nb = restore(read_notebook("submitted-metadata-stripped-and-edited.ipynb"), resources)
    assert grade_ids(nb).count("check_double") == 1
    assert nb.cells[grade_ids(nb).index("check_half")].metadata.nbgrader["points"] == 1


def test_an_edited_read_only_cell_is_marked_and_restored(read_notebook, resources):
    """Is a changed read-only cell marked as edited and given back its source?"""
    nb = restore(read_notebook("submitted-locked-cell-changed.ipynb"), resources)
    setup = nb.cells[grade_ids(nb).index("setup")]
    assert setup.metadata[MARK] == {"edited": True}
    assert setup.source == read_notebook("source.ipynb").cells[1].source


def test_an_unchanged_submission_keeps_its_answers_and_gets_the_hidden_tests(read_notebook, resources):
    """Are answers left alone, nothing marked, and the hidden tests restored?"""
    nb = restore(read_notebook("submitted-unchanged.ipynb"), resources)
    assert not any(MARK in c.metadata for c in nb.cells)
    assert "return 2 * x" in nb.cells[2].source
    assert "### BEGIN HIDDEN TESTS" in nb.cells[3].source


@pytest.mark.parametrize("edited", ["import math   \n", "\nimport math\n"])
def test_spaces_alone_are_no_edit(edited):
    """Is a read-only cell that differs in trailing spaces or blank lines seen as released?"""
    assert as_released(edited) == as_released("import math")
    assert as_released("import math\nx = 1") != as_released("import math")
