"""Where things are: the grading package's own files and the course folder it works on.

The course folder holds ``solutions/`` (nbgrader's source), ``notebooks/`` (the learner
release) and ``nbgrader_config.py``. :func:`course_root` finds it, in this order:

1. ``COURSE_ROOT`` in the environment;
2. the current folder or one above it (nbgrader, too, finds its course from where it runs);
3. the checkout this package was installed from (``pip install -e .``).

So ``course-grader`` works from an installed package as well as from a checkout.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grader.errors import CourseNotFound

PACKAGE_DIR = Path(__file__).resolve().parent
NBGRADER_CONFIG = PACKAGE_DIR / "nbgrader_config.py"
COURSE_ROOT_ENV = "COURSE_ROOT"


def is_course(folder: Path) -> bool:
    return (folder / "solutions").is_dir() and (folder / "nbgrader_config.py").is_file()


def course_root() -> Path:
    """The course folder (see the module docstring); raises CourseNotFound with what to do."""
    configured = os.environ.get(COURSE_ROOT_ENV)
    if configured:
        root = Path(configured).resolve()
        if not is_course(root):
            raise CourseNotFound(f"{COURSE_ROOT_ENV}={configured} is not a course folder: it "
                                 "needs solutions/ and nbgrader_config.py.")
        return root
    here = Path.cwd().resolve()
    for folder in (here, *here.parents, PACKAGE_DIR.parent):
        if is_course(folder):
            return folder
    raise CourseNotFound("No course folder here: run from the course checkout (the folder with "
                         f"solutions/ and nbgrader_config.py), or set {COURSE_ROOT_ENV}.")


def solutions_dir() -> Path:
    """``solutions/``: the instructor notebooks (nbgrader's source directory)."""
    return course_root() / "solutions"


def release_dir() -> Path:
    """``notebooks/``: the generated learner notebooks (nbgrader's release directory)."""
    return course_root() / "notebooks"


def assignment_names(source: Path | None = None) -> list[str]:
    """Assignment folders of the course (those holding a notebook), in section order."""
    source = source or solutions_dir()
    return sorted(p.name for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def import_roots() -> list[str]:
    """The folders that hold the ``grader`` and ``course`` packages this process uses: the
    grading workers and the kernels import from there too, whatever else is installed."""
    import course

    packages = (PACKAGE_DIR, Path(course.__file__).resolve().parent)
    return list(dict.fromkeys(str(p.parent) for p in packages))


def with_python_tools(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's folder first on PATH: nbgrader runs ``alembic`` by
    name when it creates a gradebook, and a virtual environment that was not activated
    does not have it on PATH."""
    tools = str(Path(sys.executable).parent)
    parts = env.get("PATH", "").split(os.pathsep)
    return env if tools in parts else {**env, "PATH": os.pathsep.join([tools, *parts])}
