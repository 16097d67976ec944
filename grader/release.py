"""Regenerate the learner notebooks (``notebooks/``) from the instructor sources with nbgrader.

``python -m grader generate`` runs ``nbgrader generate_assignment`` for every assignment
in ``solutions/`` inside a scratch course directory, then copies the results into
``notebooks/``. It refuses to overwrite a learner notebook that has uncommitted edits
(someone's work) unless told ``--force``.
"""

from __future__ import annotations

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
    """Learner notebooks with uncommitted changes (empty outside a git checkout)."""
    result = subprocess.run(["git", "status", "--porcelain", "--", str(release)], cwd=ROOT,
                            capture_output=True, text=True)
    if result.returncode != 0:
        return []
    return [line[3:] for line in result.stdout.splitlines() if line.endswith(".ipynb")]


def generate_assignment(name: str, source: Path, release: Path) -> None:
    """Run nbgrader on one assignment in a scratch course; copy what it writes to ``release``."""
    with tempfile.TemporaryDirectory() as scratch:
        course = Path(scratch)
        shutil.copytree(source / name, course / "solutions" / name)
        shutil.copy(ROOT / "grader" / "nbgrader_config.py", course / "nbgrader_config.py")
        command = [sys.executable, "-m", "nbgrader", "generate_assignment", name, "--force",
                   f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}",
                   "--log-level=WARN"]
        result = subprocess.run(command, cwd=course, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"nbgrader could not generate {name}:\n{result.stderr[-3000:]}")
        target = release / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(course / "notebooks" / name, target)


def generate(names: list[str] | None = None, force: bool = False) -> list[str]:
    """Regenerate ``notebooks/``; returns the assignments written."""
    edited = edited_notebooks()
    if edited and not force:
        raise SystemExit(
            "Refusing to overwrite learner notebooks with uncommitted changes:\n  "
            + "\n  ".join(edited)
            + "\nCommit or move that work first, or pass --force to discard it."
        )
    names = names or assignments()
    RELEASE.mkdir(exist_ok=True)
    for name in names:
        if not (SOURCE / name).is_dir():
            raise SystemExit(f"No assignment {name!r} in {SOURCE}; choose from {assignments()}.")
        generate_assignment(name, SOURCE, RELEASE)
    return names
