"""``OverwriteCells`` that repairs test cells before restoring them from the source."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import OverwriteCells
from traitlets import Unicode

from grader.autograde.worker.preprocessors.cell_marks import MARK, RESTORED_NOTE
from grader.publish import setup_cell

HIDDEN_TESTS = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?",
                          re.S | re.M)


def as_released(source: str) -> str:
    """A read-only cell as the learner received it: hidden tests removed, spaces normalised,
    and the set-up cell's repository and branch as any student release may have set them."""
    text = setup_cell.neutral(HIDDEN_TESTS.sub("", source))
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


class RestoreCells(OverwriteCells):
    """``OverwriteCells`` that repairs test cells before restoring them from the source.

    * A cell whose nbgrader ``grade_id`` is known gets the source notebook's nbgrader
      metadata back (edited ``points``, ``grade`` or ``locked`` flags cannot crash or
      cheat the grading).
    * A grade cell missing from the submission (deleted, or stripped of its metadata) is
      inserted after the nearest earlier instructor cell that is present, marked with a
      note, and then restored like any other grade cell.
    """

    source_notebook = Unicode("", help="The instructor notebook being graded.").tag(config=True)

    def _source_cells(self) -> list[NotebookNode]:
        folder = Path(self.source_notebook)
        path = folder / f"{self.notebook_id}.ipynb" if folder.is_dir() else folder
        nb = nbformat.read(path, as_version=4)
        return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")]

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        source = {c.metadata.nbgrader["grade_id"]: c for c in self._source_cells()}
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in source:
                original = source[grade_id]
                if original.metadata.nbgrader.get("locked") and \
                        as_released(cell.source) != as_released(original.source):
                    cell.metadata[MARK] = {"edited": True}
                cell.metadata["nbgrader"] = copy.deepcopy(original.metadata.nbgrader)
            else:  # unknown, or a duplicate DeduplicateIds emptied: a plain cell
                cell.metadata.pop("nbgrader", None)
        self.missing_cell_notification = RESTORED_NOTE
        self.add_missing_cells = True
        return super().preprocess(nb, resources)

    def add_missing_grade_cells(self, nb, resources):
        """Insert missing grade cells in instructor order, whatever else is missing."""
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        stored = {cell.name: cell for cell in source_nb.source_cells}
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        order = [c.metadata.nbgrader["grade_id"] for c in self._source_cells()]
        for position, grade_id in enumerate(order):
            if grade_id not in grade_cells or self._index(nb, grade_id) is not None:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_id)
            cell = self.missing_cell_transform(stored[grade_id], grade_cells[grade_id].max_score,
                                               is_solution=grade_id in solutions)
            anchors = [self._index(nb, earlier) for earlier in reversed(order[:position])]
            anchor = next((i for i in anchors if i is not None), -1)
            nb.cells.insert(anchor + 1, cell)
        return nb, resources

    @staticmethod
    def _index(nb: NotebookNode, grade_id: str) -> int | None:
        for index, cell in enumerate(nb.cells):
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return index
        return None
