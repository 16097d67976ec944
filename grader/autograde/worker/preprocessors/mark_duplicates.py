"""``DeduplicateIds`` that marks the copies it demotes, so the report can say so."""

from __future__ import annotations

from nbgrader.preprocessors import DeduplicateIds

from grader.autograde.worker.preprocessors.cell_marks import MARK


class MarkDuplicates(DeduplicateIds):
    """``DeduplicateIds`` that leaves a mark on the copies it demotes to plain cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if grade_id and not cell.metadata.get("nbgrader"):
            cell.metadata[MARK] = {"duplicate_of": grade_id}
        return cell, resources
