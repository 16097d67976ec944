"""Fixtures of the preprocessor tests (nbgrader's own style: small notebooks in files/, a
gradebook holding the source as ``nbgrader generate_assignment`` records it; no kernel)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

from tests.settings import shared_dir

FILES = Path(__file__).resolve().parent / "files"


def read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(FILES / name, as_version=4)


@pytest.fixture(scope="session")
def source_gradebook(tmp_path_factory, request) -> Path:
    """A gradebook holding notebook ``source`` of assignment ``ps`` as nbgrader records it
    (by its SaveCells), made once per run, whatever the pytest-xdist workers: nbgrader's
    migrations take seconds. Copy it, never write into it."""
    from filelock import FileLock

    folder = shared_dir(tmp_path_factory, request) / "preprocessors-gradebook"
    folder.mkdir(exist_ok=True)
    path = folder / "gradebook.db"
    with FileLock(str(folder / "made.lock")):
        if not (folder / "made").exists():
            _record_source(path)
            (folder / "made").touch()
    return path


def _record_source(path: Path) -> None:
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveCells

    from grader.paths import with_python_tools

    saved = os.environ["PATH"]
    os.environ["PATH"] = with_python_tools(dict(os.environ))["PATH"]  # nbgrader runs alembic
    try:
        with Gradebook(f"sqlite:///{path}") as gb:
            gb.add_assignment("ps")
        SaveCells().preprocess(read("source.ipynb"), {"nbgrader": {
            "db_url": f"sqlite:///{path}", "assignment": "ps", "notebook": "source"}})
    finally:
        os.environ["PATH"] = saved


@pytest.fixture()
def resources(tmp_path, source_gradebook) -> dict:
    """nbgrader's resources for notebook ``source`` of assignment ``ps``, student ``learner``,
    on a fresh copy of :func:`source_gradebook`."""
    path = tmp_path / "gradebook.db"
    shutil.copy(source_gradebook, path)
    return {"nbgrader": {"db_url": f"sqlite:///{path}", "assignment": "ps", "notebook": "source",
                         "student": "learner"}}


@pytest.fixture()
def read_notebook():
    """A fixture notebook of files/, by name."""
    return read


@pytest.fixture()
def source_notebook() -> str:
    """The instructor notebook the fixtures were released from."""
    return str(FILES / "source.ipynb")
