"""The course's own notebooks as code and as sample submissions: for tests and benchmarks.

One module that both ``tests/`` and ``bench/`` import (neither imports the other's).

:func:`load_solution_namespace` runs the given and solution cells of an instructor
notebook and returns its namespace (the reference implementations, to check the checks
and to benchmark). A *solved* submission is the learner notebook (``notebooks/``) with
every solution cell filled in from the instructor notebook (``solutions/``), markers
removed: what a perfect learner hands in. :func:`plant` changes one cell of it to make a
planted submission.
"""

from __future__ import annotations

import ast
import copy
import functools
import re
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from grader.results import exercise_name

ROOT = Path(__file__).resolve().parent  # the checkout


def notebook_path(assignment: str, folder: str = "solutions", root: Path = ROOT) -> Path:
    """The one notebook of ``assignment`` under ``folder`` (solutions/ or notebooks/)."""
    (path,) = sorted((root / folder / assignment).glob("*.ipynb"))
    return path


def notebook_name(assignment: str, root: Path = ROOT) -> str:
    return notebook_path(assignment, root=root).name


def as_python(source: str) -> str:
    """A cell's code as plain Python: IPython's ``%magic`` lines (the set-up cell's ``%pip``
    for Colab) written as the calls IPython makes of them."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source) if "%" in source or "!" in source else source


def exercise_cells(path: Path) -> list[str]:
    """Python of the setup, given (read-only) and solution cells, in notebook order."""
    nb = nbformat.read(path, as_version=4)
    sources = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta and not meta.get("grade"):
            sources.append(as_python(cell.source))
    return sources


@functools.cache
def load_solution_namespace(assignment: str) -> dict:
    """The namespace after running the setup, given and solution cells of ``assignment``."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict = {"__name__": f"solution_{assignment.replace('.', '_').replace('-', '_')}"}
    for source in exercise_cells(notebook_path(assignment)):
        exec(compile(source, f"<{assignment}>", "exec"), namespace)  # noqa: S102 - our own notebooks
    return namespace


HIDDEN = "### BEGIN HIDDEN TESTS"


def graded_cells(assignment: str) -> dict[str, str]:
    """Source of every grade cell of the instructor notebook, by exercise name (``check_`` or
    ``predict_`` dropped)."""
    nb = nbformat.read(notebook_path(assignment), as_version=4)
    return {exercise_name(cell.metadata["nbgrader"]["grade_id"]): cell.source for cell in nb.cells
            if cell.metadata.get("nbgrader", {}).get("grade")}


def visible_test(assignment: str, exercise: str) -> str:
    """The visible test of an exercise: its grade cell's source before the hidden tests."""
    source = graded_cells(assignment)[exercise]
    return source[: source.index(HIDDEN)] if HIDDEN in source else source


def run_visible_test(assignment: str, exercise: str, impl) -> None:
    """Run the visible test of ``exercise`` on ``impl`` (instead of the solution), as the
    learner's notebook would after the solution cells; raises what the test cell raises."""
    namespace = {**load_solution_namespace(assignment), exercise: impl}
    exec(compile(visible_test(assignment, exercise), f"<visible test of {exercise}>", "exec"),  # noqa: S102
         namespace)


def solved(assignment: str, root: Path = ROOT) -> NotebookNode:
    """The learner notebook with the instructor's solutions filled in."""
    name = notebook_name(assignment, root)
    source = nbformat.read(root / "solutions" / assignment / name, as_version=4)
    learner = nbformat.read(root / "notebooks" / assignment / name, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in learner.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", "",
                                 answers[meta["grade_id"]], flags=re.M)
    return learner


def cell_index(nb: NotebookNode, grade_id: str) -> int:
    """Position of the cell with nbgrader ``grade_id``."""
    for index, cell in enumerate(nb.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return index
    raise KeyError(f"no cell {grade_id!r} in the notebook")


def solution_ids(nb: NotebookNode) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")]


def plant(nb: NotebookNode, grade_id: str, source: str, append: bool = True) -> NotebookNode:
    """A copy of ``nb`` whose cell ``grade_id`` gets ``source`` appended (or replaced)."""
    nb = copy.deepcopy(nb)
    cell = nb.cells[cell_index(nb, grade_id)]
    cell.source = cell.source.rstrip() + "\n\n" + source if append else source
    return nb


def insert_cell(nb: NotebookNode, after: str, source: str) -> NotebookNode:
    """A copy of ``nb`` with a plain code cell (the learner's own) after cell ``after``."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(cell_index(nb, after) + 1, nbformat.v4.new_code_cell(source))
    return nb


def write(nb: NotebookNode | str | bytes, root: Path, student: str, assignment: str,
          name: str | None = None, timestamp: str | None = None) -> Path:
    """Save a submission in nbgrader's layout; text/bytes are written as they are."""
    folder = root / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or notebook_name(assignment))
    if isinstance(nb, bytes):
        path.write_bytes(nb)
    elif isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, path)
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp)
    return path


def benchmark_set(root: Path, assignments: list[str], copies: int = 2) -> Path:
    """A mixed class for benchmarks: per assignment, correct and broken submissions.

    For each assignment and copy: one solved notebook, one with the first exercise wrong
    (its function returns garbage), one with a syntax error, one raising in the setup of
    an exercise. ``copies=2`` on one assignment gives 8 notebooks.
    """
    for assignment in assignments:
        nb = solved(assignment)
        first = solution_ids(nb)[0]
        variants = {
            "correct": nb,
            "wrong": plant(nb, first, f"{first} = lambda *args, **kwargs: None"),
            "syntax": plant(nb, first, "def broken(:\n    pass"),
            "exception": plant(nb, first, "raise RuntimeError('a learner bug')"),
        }
        for copy_index in range(copies):
            for kind, variant in variants.items():
                write(variant, root, f"{kind}-{copy_index}", assignment)
    return root


UNFINISHED = ("NotImplementedError", "NotAttempted")
NAME_ERROR = re.compile(r"name '(\w+)' is not defined")


def not_for_unfinished_exercises(nb: NotebookNode, errors: list[tuple[int, str, str]]) -> list:
    """The errors ``(cell index, name, message)`` of a learner notebook's run that its unfinished
    exercises do not explain: a blank exercise raises NotImplementedError (its test cell says
    NotAttempted), and a later cell that reads a name a stopped cell would have assigned at its
    top level (10.7's trained ``model``) fails with that NameError, and so on down the notebook."""
    undefined, unexplained = set(), []
    for i, ename, message in sorted(errors):
        name = (m := NAME_ERROR.fullmatch(message)) and m.group(1)
        if ename not in UNFINISHED and not (ename == "NameError" and name in undefined):
            unexplained.append((i, ename, message))
            continue
        for node in ast.parse(as_python(nb.cells[i].source)).body:
            if isinstance(node, ast.Assign):  # `a = ...` and `a, b = ...` alike
                undefined |= {t.id for target in node.targets for t in ast.walk(target)
                              if isinstance(t, ast.Name)}
    return unexplained
