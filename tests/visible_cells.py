"""Run a notebook's visible test (its grade cell up to the hidden tests) against any answer."""

from __future__ import annotations

import nbformat

from bench.samples import load_solution_namespace, notebook_path

HIDDEN = "### BEGIN HIDDEN TESTS"


def visible_source(assignment: str, grade_id: str) -> str:
    """The grade cell ``grade_id`` of the instructor notebook, hidden tests cut off."""
    for cell in nbformat.read(notebook_path(assignment), as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return cell.source.split(HIDDEN)[0]
    raise KeyError(f"no cell {grade_id!r} in {assignment}")


def run_visible(assignment: str, grade_id: str, **answers) -> None:
    """Run the visible test with the notebook's namespace, ``answers`` replacing its definitions."""
    namespace = {**load_solution_namespace(assignment), **answers}
    exec(compile(visible_source(assignment, grade_id), f"<{grade_id}>", "exec"), namespace)  # noqa: S102
