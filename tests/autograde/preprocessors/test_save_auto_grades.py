"""SaveAutoGradesIgnoringStderr (grader/autograde/worker/preprocessors/save_auto_grades.py),
no kernel: the outputs of an executed notebook are in the fixture."""

from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades

from grader.autograde.worker.preprocessors.save_auto_grades import SaveAutoGradesIgnoringStderr


def scores(preprocessor, nb, resources) -> dict[str, float]:
    db_url = resources["nbgrader"]["db_url"]
    with Gradebook(db_url) as gb:
        gb.update_or_create_student("learner")
        gb.update_or_create_submission("ps", "learner")
    preprocessor.preprocess(nb, resources)
    with Gradebook(db_url) as gb:
        notebook = gb.find_submission_notebook("source", "ps", "learner")
        return {g.name: g.score for g in notebook.grades}


def test_a_warning_costs_nothing_a_failure_everything(read_notebook, resources):
    """Does a test cell that wrote a warning on stderr keep its points, and one that raised
    get none?"""
    nb = read_notebook("executed-warning-and-failure.ipynb")
    assert scores(SaveAutoGradesIgnoringStderr(), nb, resources) == {"check_double": 2,
                                                                     "check_half": 0}
    assert nb.cells[3].outputs[0]["name"] == "stderr"  # the output is kept for the feedback


def test_stock_nbgrader_would_zero_the_warning(read_notebook, resources):
    """Is this preprocessor needed: does nbgrader's own give the warning cell 0?"""
    nb = read_notebook("executed-warning-and-failure.ipynb")
    assert scores(SaveAutoGrades(), nb, resources)["check_double"] == 0
