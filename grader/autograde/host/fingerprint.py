"""Fingerprints that decide what a rerun may skip.

A rerun into the same OUT skips a submission whose fingerprint is unchanged: the same
student files, graded by the same code, against the same source, with the same options.
"The same code" is everything that can change a grade: the whole grader (hidden checks,
host side, nbgrader configuration), the course helpers (the visible tests decide points
too), and the installed torch, numpy and nbgrader.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from grader.paths import grading_packages

if TYPE_CHECKING:
    from grader.autograde.host.options import Options
    from grader.autograde.host.submissions import Assignment, Submission

#: Installed packages whose version is part of the fingerprint.
VERSIONED = ("torch", "numpy", "nbgrader")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_digest(folder: Path, pattern: str = "**/*") -> str:
    """One digest of every file under ``folder`` matching ``pattern`` (names and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob(pattern)):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            digest.update(file_digest(path).encode())
    return digest.hexdigest()


def content_hash(sub: Submission, context: str) -> str:
    """Changes when the student's files change, or ``context`` (grader, source, options)."""
    digest = hashlib.sha256(f"{sub.student}\0{sub.assignment}\0{context}\0{sub.problem}".encode())
    for name in sub.files:
        digest.update(name.encode() + b"\0")
        digest.update(file_digest(sub.folder / name).encode())
    return digest.hexdigest()


def grading_code_digest(packages: Sequence[Path] | None = None) -> str:
    """One digest of every Python file of ``packages`` (default :func:`grading_packages`)
    and of the installed versions of :data:`VERSIONED`."""
    digest = hashlib.sha256()
    for package in packages or grading_packages():
        digest.update(f"{package.name}\0{tree_digest(package, '**/*.py')}\0".encode())
    for name in VERSIONED:
        digest.update(f"{name}=={version(name)}\0".encode())
    return digest.hexdigest()


def assignment_context(assignment: Assignment, options: Options, code: str) -> str:
    """What, besides the student's files, decides a grade: the source notebooks, the grading
    code (``code``, from :func:`grading_code_digest`), the options and the deadline."""
    return "|".join([tree_digest(assignment.source, "*.ipynb"), code, options.grading_key(),
                     options.deadline(assignment.name) or ""])
