"""``SaveAutoGrades`` where text on stderr (warnings) does not zero a grade cell."""

from __future__ import annotations

from nbgrader.preprocessors import SaveAutoGrades


class SaveAutoGradesIgnoringStderr(SaveAutoGrades):
    """``SaveAutoGrades`` where text on stderr (warnings) does not zero a grade cell."""

    def _add_score(self, cell, resources):
        shown = cell.outputs
        cell.outputs = [o for o in shown if not (o.output_type == "stream" and o.name == "stderr")]
        try:
            super()._add_score(cell, resources)
        finally:
            cell.outputs = shown
