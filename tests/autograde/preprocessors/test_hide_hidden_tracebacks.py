"""HideHiddenTracebacks (grader/autograde/worker/preprocessors/hide_hidden_tracebacks.py), no kernel."""

from __future__ import annotations

import nbformat
from nbgrader.preprocessors import ClearHiddenTests

from grader.autograde.worker.preprocessors.hide_hidden_tracebacks import HideHiddenTracebacks

HIDDEN_LINE = "assert double(3) == 6, 'hidden case'"
TEST_CELL = f"visible_check(double)\n### BEGIN HIDDEN TESTS\n{HIDDEN_LINE}\n### END HIDDEN TESTS"
TRACEBACK = ["---------------------------------------------------------------------------",
             "AssertionError                            Traceback (most recent call last)",
             f"Cell In[4], line 3\n      1 visible_check(double)\n----> 3 {HIDDEN_LINE}",
             "AssertionError: hidden case"]


def notebook():
    error = nbformat.v4.new_output("error", ename="AssertionError", evalue="hidden case", traceback=TRACEBACK)
    test = nbformat.v4.new_code_cell(TEST_CELL, outputs=[error])
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "check_double", "points": 1, "solution": False,
                                 "locked": True, "schema_version": 3}
    plain = nbformat.v4.new_code_cell("1 / 0", outputs=[nbformat.v4.new_output(
        "error", ename="ZeroDivisionError", evalue="division by zero", traceback=list(TRACEBACK))])
    return nbformat.v4.new_notebook(cells=[test, plain])


def test_feedback_shows_no_hidden_line():
    """After the feedback's preprocessors, does no output of a test cell quote its hidden block,
    while its error stays named and other cells' tracebacks stay whole?"""
    nb, resources = HideHiddenTracebacks()(notebook(), {})  # as an exporter calls it: enabled or not
    nb, _ = ClearHiddenTests()(nb, resources)
    test, plain = nb.cells
    assert HIDDEN_LINE not in nbformat.writes(nbformat.v4.new_notebook(cells=[test]))
    assert test.outputs[0]["traceback"] == ["AssertionError: hidden case"]
    assert plain.outputs[0]["traceback"] == TRACEBACK


def test_clear_hidden_tests_alone_leaks_the_line():
    """Planted: without HideHiddenTracebacks, nbgrader's ClearHiddenTests leaves the line in the output."""
    nb, _ = ClearHiddenTests().preprocess(notebook(), {})
    assert HIDDEN_LINE not in nb.cells[0].source
    assert any(HIDDEN_LINE in line for line in nb.cells[0].outputs[0]["traceback"])
