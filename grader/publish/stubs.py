"""What a learner sees in place of a solution: nbgrader's stub, except in a prediction's answer cell.

A prediction (course.checking.predict) asks for a value, and its answer cell already opens with
the line the learner edits, ``<name> = None  # your prediction: ...``. nbgrader's stub after it
(``raise NotImplementedError()``) would make that edit raise, so :class:`ClearSolutionsKeepingPredictions`
replaces such a cell's solution region with nothing: setting the value is all it takes.
grader/nbgrader_config.py puts it in nbgrader's ``generate_assignment`` in place of ClearSolutions.
"""

from __future__ import annotations

import re

from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import ClearSolutions

from grader.errors import PublishError


def is_prediction_answer(cell) -> bool:
    """Is ``cell`` a prediction's answer cell: a solution cell whose first line is
    ``<its grade id> = None``?"""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if not meta.get("solution") or meta.get("grade") or cell.get("cell_type") != "code":
        return False
    first_line = cell.source.split("\n", 1)[0]
    return re.match(rf"{re.escape(meta.get('grade_id', ''))} = None\b", first_line) is not None


class ClearSolutionsKeepingPredictions(ClearSolutions):
    """nbgrader's ClearSolutions (with the course's stubs), but a prediction's answer cell keeps
    only its ``<name> = None`` line: no stub is added to it."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not is_prediction_answer(cell):
            return super().preprocess_cell(cell, resources, cell_index)
        stubs = self.code_stub
        self.code_stub = {**stubs, resources["language"]: ""}
        try:
            cell, resources = super().preprocess_cell(cell, resources, cell_index)
        finally:
            self.code_stub = stubs
        cell.source = cell.source.rstrip("\n")
        return cell, resources


def generate_preprocessors() -> list:
    """nbgrader's own ``generate_assignment`` steps, with ClearSolutions replaced by
    :class:`ClearSolutionsKeepingPredictions`."""
    steps = GenerateAssignment.class_traits()["preprocessors"].default()
    if ClearSolutions not in steps:
        raise PublishError("This nbgrader's generate_assignment has no ClearSolutions step to replace; "
                           "install the nbgrader of requirements.txt (0.9).")
    return [ClearSolutionsKeepingPredictions if step is ClearSolutions else step for step in steps]
