"""Is the read-only code a notebook gives (earlier sections' blocks) the earlier solution itself?"""

import ast

import nbformat
import pytest

from grader.paths import assignment_names as assignments
from grader.paths import solutions_dir
from samples import as_python

SOURCE = solutions_dir()

ASSIGNMENTS = assignments()
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def definitions(source: str) -> dict[str, str]:
    """Top-level functions and classes of ``source`` by name, as their dedented source text."""
    source = "\n".join(line for line in as_python(source).splitlines() if line.strip() not in MARKERS)
    tree = ast.parse(source)
    return {node.name: ast.get_source_segment(source, node) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def cells(name: str, kind: str) -> dict[str, str]:
    """Definitions in the solution cells (kind='solution') or given cells (kind='given')."""
    (path,) = (SOURCE / name).glob("*.ipynb")
    found: dict[str, str] = {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        is_given = meta.get("locked") and not meta.get("grade") and not meta.get("solution")
        if cell.cell_type == "code" and (meta.get("solution") if kind == "solution" else is_given):
            found.update(definitions(cell.source))
    return found


@pytest.mark.parametrize("later", ASSIGNMENTS[1:])
def test_given_blocks_match_earlier_solutions(later):
    """Does every given block equal the solution of the section that asks for it?"""
    given = cells(later, "given")
    earlier = {}
    for name in ASSIGNMENTS[: ASSIGNMENTS.index(later)]:
        earlier.update(cells(name, "solution"))
    shared = sorted(set(given) & set(earlier))
    for definition in shared:
        assert given[definition] == earlier[definition], (
            f"{later} gives a {definition} that differs from its earlier solution: copy it again")
    if later != ASSIGNMENTS[1]:
        assert shared, f"{later} gives no earlier block? (the test would prove nothing)"
