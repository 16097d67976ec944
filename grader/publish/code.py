"""What the bundle and its leak check share: code cells and modules read as Python, the release record."""

from __future__ import annotations

from pathlib import Path

import nbformat

#: The record of what a bundle published (sections, repository, branch).
RELEASE_FILE = ".course-release.json"


def code_cells(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]


def as_python(text: str) -> str:
    """A code cell as Python: IPython's ``%magic`` and ``!shell`` lines as ``pass``."""
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!"))
                     else line for line in text.splitlines())


def code_text(path: Path) -> str:
    """The code a learner receives in a file: code cells of notebooks, whole text otherwise."""
    if path.suffix == ".ipynb":
        return "\n".join(code_cells(path))
    return path.read_text(errors="replace")
