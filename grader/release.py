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
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "solutions"
RELEASE = ROOT / "notebooks"


def assignments(source: Path = SOURCE) -> list[str]:
    """Assignment folders of the course, in section order."""
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def edited_notebooks(release: Path = RELEASE) -> list[str]:
    """Committed learner notebooks with uncommitted edits (empty outside a git checkout)."""
    if not release.is_dir():
        return []
    result = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=release,
                            capture_output=True, text=True)
    if result.returncode != 0:
        return []
    return [line[3:] for line in result.stdout.splitlines() if line.endswith(".ipynb")]


def put_python_tools_on_path() -> None:
    """nbgrader runs tools installed beside Python (alembic) by name: make them findable."""
    tools = str(Path(sys.executable).parent)
    if tools not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = tools + os.pathsep + os.environ.get("PATH", "")


def nbgrader_api(course: Path):
    """nbgrader's Python API on the course directory ``course``, with the course's config."""
    put_python_tools_on_path()
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT / "grader")).load_config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def generate_assignments(names: list[str], source: Path, release: Path) -> None:
    """Run nbgrader on ``names`` in a scratch course; copy what it writes to ``release``."""
    with tempfile.TemporaryDirectory() as scratch:
        course = Path(scratch)
        for name in names:
            shutil.copytree(source / name, course / "solutions" / name)
        api = nbgrader_api(course)
        for name in names:
            result = api.generate_assignment(name, force=True)
            if not result["success"]:
                detail = (result.get("error") or result.get("log") or "")[-3000:]
                raise RuntimeError(f"nbgrader could not generate {source / name}:\n{detail}")
            # Copy over, never delete: files of the learner's own in the folder stay.
            shutil.copytree(course / "notebooks" / name, release / name, dirs_exist_ok=True)


def generate(names: list[str] | None = None, force: bool = False,
             release: Path = RELEASE) -> list[str]:
    """Regenerate ``release`` (``notebooks/``); returns the assignments written."""
    edited = edited_notebooks(release)
    if edited and not force:
        raise SystemExit(
            "Refusing to overwrite learner notebooks with uncommitted changes:\n  "
            + "\n  ".join(edited)
            + "\nCommit or move that work first, or pass --force to discard it."
        )
    names = names or assignments()
    unknown = [name for name in names if not (SOURCE / name).is_dir()]
    if unknown:
        raise SystemExit(f"No assignment {unknown[0]!r} in {SOURCE}; choose from {assignments()}.")
    release.mkdir(exist_ok=True)
    generate_assignments(names, SOURCE, release)
    return names
