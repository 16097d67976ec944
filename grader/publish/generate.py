"""Regenerate the learner notebooks (``notebooks/``) from the instructor sources with nbgrader.

``python -m grader generate`` runs ``nbgrader generate_assignment`` for every assignment
in ``solutions/`` inside a scratch course directory, then copies the results into
``notebooks/``. It refuses to overwrite a committed learner notebook that has uncommitted
edits (someone's work) unless told ``--force``, and never deletes other files there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from grader.errors import PublishError, UsageError
from grader.paths import (
    CourseLayout,
    assignment_names,
    nbgrader_config,
    release_dir,
    solutions_dir,
    with_python_tools,
)


def edited_notebooks(release: Path) -> list[str]:
    """Committed learner notebooks with uncommitted edits (empty outside a git checkout)."""
    if not release.is_dir():
        return []
    result = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=release,
                            capture_output=True, text=True)
    if result.returncode != 0:
        return []
    return [line[3:] for line in result.stdout.splitlines() if line.endswith(".ipynb")]


def nbgrader_api(course: Path):
    """nbgrader's Python API on the course directory ``course``, with the course's config."""
    os.environ.update(with_python_tools(dict(os.environ)))
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    config = nbgrader_config(course)
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def generate_assignments(names: list[str], source: Path, release: Path) -> None:
    """Run nbgrader on ``names`` in a scratch course; copy what it writes to ``release``."""
    with tempfile.TemporaryDirectory() as scratch:
        course = Path(scratch)
        for name in names:
            shutil.copytree(source / name, CourseLayout(course).source(name))
        api = nbgrader_api(course)
        for name in names:
            result = api.generate_assignment(name, force=True)
            if not result["success"]:
                detail = (result.get("error") or result.get("log") or "")[-3000:]
                raise PublishError(f"nbgrader could not generate {source / name}:\n{detail}")
            # Copy over, never delete: files of the learner's own in the folder stay.
            shutil.copytree(CourseLayout(course).release(name), release / name, dirs_exist_ok=True)


def generate(names: list[str] | None = None, force: bool = False,
             release: Path | None = None, source: Path | None = None) -> list[str]:
    """Regenerate ``release`` (default ``notebooks/``) from ``source`` (default
    ``solutions/``); returns the assignments written."""
    release = release or release_dir()
    source = source or solutions_dir()
    names = names or assignment_names(source)
    unknown = [name for name in names if not (source / name).is_dir()]
    if unknown:
        raise UsageError(f"No assignment {unknown[0]!r} in {source}; choose from "
                         f"{assignment_names(source)}.")
    edited = [path for path in edited_notebooks(release) if Path(path).parent.name in names]
    if edited and not force:
        raise PublishError(
            "Refusing to overwrite learner notebooks with uncommitted changes:\n  "
            + "\n  ".join(edited)
            + "\nCommit or move that work first, or pass --force to discard it."
        )
    release.mkdir(exist_ok=True)
    generate_assignments(names, source, release)
    return names
