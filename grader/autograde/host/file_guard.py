"""The grader's own files, checked after every notebook: tampering seen even without a sandbox.

With bubblewrap the kernels see the grading code and the course helpers read-only. Without
it (a platform where bubblewrap cannot run, or ``--no-file-sandbox``) learner code runs with
the grader's rights and could rewrite a hidden check for every later student. So the run
takes a snapshot of those files when it starts (sources, the bytecode Python would load,
the course data), and after every notebook compares them byte for byte: a change is put
back at once, and the submission that made it is flagged (:mod:`grader.autograde.host.pool`).
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

from grader.paths import data_dirs, grading_packages


def grading_folders() -> list[Path]:
    """What kernels must not change: the grader, the course helpers and the course data."""
    return [*grading_packages(), *data_dirs()[:1]]


class Guard:
    """The files under ``folders`` as they were when the guard was made."""

    def __init__(self, folders: list[Path]):
        self.folders = [Path(f).resolve() for f in folders if Path(f).is_dir()]
        for folder in self.folders:  # the bytecode now, so that no later import writes any
            compileall.compile_dir(str(folder), quiet=2)
        self.files = self._read()

    def _read(self) -> dict[Path, tuple[bytes, int]]:
        """Every file's bytes and modification time (bytecode is valid for a source's mtime)."""
        return {path: (path.read_bytes(), path.stat().st_mtime_ns) for folder in self.folders
                for path in sorted(folder.rglob("*")) if path.is_file() and not path.is_symlink()}

    def changes(self) -> list[str]:
        """Files changed, deleted or added since the snapshot (sorted), as readable paths."""
        now = {path: path.read_bytes() for folder in self.folders
               for path in folder.rglob("*") if path.is_file() and not path.is_symlink()}
        changed = [p for p, (content, _) in self.files.items() if now.get(p) != content]
        added = [p for p in now if p not in self.files]
        return sorted(self._name(p) for p in changed + added)

    def restore(self) -> None:
        """Put every file back as it was (bytes and times); remove files that were added."""
        for folder in self.folders:
            for path in sorted(folder.rglob("*"), reverse=True):
                if (path.is_file() or path.is_symlink()) and path not in self.files:
                    path.unlink()
        for path, (content, mtime) in self.files.items():
            if not path.is_file() or path.read_bytes() != content:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            os.utime(path, ns=(mtime, mtime))

    def _name(self, path: Path) -> str:
        folder = next(f for f in self.folders if path.is_relative_to(f))
        return str(Path(folder.name) / path.relative_to(folder))
