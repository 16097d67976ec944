"""Feedback never shows a hidden test's source: a test cell's traceback is cut to its last line.

nbgrader's ``ClearHiddenTests`` removes the hidden block from a test cell's source, but the
cell's error output still holds the traceback IPython printed, and that quotes the failing
line (``----> 6 assert double(3) == 6``). The course's own checks raise failures that render
as their message alone, so this only bites an instructor-added exercise with a plain assert;
for every test cell that had a hidden block, each error output keeps ``ename: evalue`` only.
Runs before ``ClearHiddenTests``, which removes the marker it looks for.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN = "### BEGIN HIDDEN TESTS"


class HideHiddenTracebacks(NbGraderPreprocessor):
    """Cut the tracebacks of test cells with hidden tests to their last line (enabled, as nbgrader's
    own preprocessors are: an exporter runs a registered preprocessor only if it is)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and HIDDEN in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources
