"""A prediction's answer cell, as released: setting the value is all it takes.

Each learner notebook's prediction cell is ``<name> = None  # your prediction: ...`` and
nothing else (no ``raise NotImplementedError()`` after it: grader/publish/stubs.py). Here every
one is run as a learner would, with the value set (the instructor's), and then its test cell.
"""

import ast
import importlib

import nbformat
import pytest

from grader.paths import assignment_names
from grader.publish.stubs import is_prediction_answer
from samples import notebook_path


def prediction_cells(assignment: str, folder: str) -> dict[str, tuple[str, str]]:
    """``{name: (answer cell source, test cell source)}`` of the notebook's predictions."""
    cells = nbformat.read(notebook_path(assignment, folder), as_version=4).cells
    tests = {c.metadata["nbgrader"]["grade_id"]: c.source for c in cells
             if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("predict_")}
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in cells if is_prediction_answer(c)}
    assert sorted(f"predict_{name}" for name in answers) == sorted(tests), \
        f"{assignment}: every predict_<name> test cell needs an answer cell opening '<name> = None'"
    return {name: (answers[name], tests[f"predict_{name}"]) for name in answers}


CASES = [(a, name) for a in assignment_names() for name in prediction_cells(a, "notebooks")]


def test_every_notebook_asks_a_prediction():
    assert {a for a, _ in CASES} == set(assignment_names())


@pytest.mark.parametrize(("assignment", "name"), CASES)
def test_setting_the_prediction_is_all_it_takes(assignment, name):
    """Is the released cell the single line ``<name> = None``, and does it, with the value set,
    run with no error, and its test cell after it pass?"""
    released, test_cell = prediction_cells(assignment, "notebooks")[name]
    (statement,) = ast.parse(released).body
    assert isinstance(statement, ast.Assign) and ast.unparse(statement) == f"{name} = None", released
    solved: dict = {}
    exec(prediction_cells(assignment, "solutions")[name][0], solved)  # noqa: S102 - our own notebook
    namespace = {"visible": importlib.import_module(f"course.visible.s{assignment[:4].replace('.', '_')}")}
    exec(released.replace(f"{name} = None", f"{name} = {solved[name]!r}", 1), namespace)  # noqa: S102
    exec(test_cell, namespace)  # noqa: S102 - passes, or raises what the learner would see
