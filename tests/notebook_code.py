"""Load the exercise code of an instructor notebook, to test the checks against it."""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
import nbformat

ROOT = Path(__file__).resolve().parent.parent


def notebook_path(assignment: str, folder: str = "solutions") -> Path:
    """The one notebook of ``assignment`` under ``folder``."""
    (path,) = sorted((ROOT / folder / assignment).glob("*.ipynb"))
    return path


def exercise_cells(path: Path) -> list[str]:
    """Sources of the given (read-only) and solution cells, in notebook order."""
    nb = nbformat.read(path, as_version=4)
    sources = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta and not meta.get("grade"):
            sources.append(cell.source)
    return sources


@functools.cache
def load_solution_namespace(assignment: str) -> dict:
    """The namespace after running the setup, given and solution cells of ``assignment``."""
    matplotlib.use("Agg")
    namespace: dict = {"__name__": f"solution_{assignment.replace('.', '_').replace('-', '_')}"}
    for source in exercise_cells(notebook_path(assignment)):
        exec(compile(source, f"<{assignment}>", "exec"), namespace)  # noqa: S102 - our own notebooks
    return namespace
