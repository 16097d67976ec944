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
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.errors import CourseNotFound, ShadowedPackage

PACKAGE_DIR = Path(__file__).resolve().parent  # grader/
NBGRADER_CONFIG = PACKAGE_DIR / "nbgrader_config.py"
COURSE_ROOT_ENV = "COURSE_ROOT"
#: nbgrader's course id when the course's nbgrader_config.py sets none
#: (``c.CourseDirectory.course_id``; the scratch gradebooks of the workers always use it).
COURSE_ID = "transformer-course"
#: Folders of a course (nbgrader's source and release directories, grader/nbgrader_config.py).
SOLUTIONS, RELEASE = "solutions", "notebooks"
GRADEBOOK = "gradebook.db"


def is_course(folder: Path) -> bool:
    return (folder / SOLUTIONS).is_dir() and (folder / "nbgrader_config.py").is_file()


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
    return course_root() / SOLUTIONS


def release_dir() -> Path:
    """``notebooks/``: the generated learner notebooks (nbgrader's release directory)."""
    return course_root() / RELEASE


def section_of(assignment: str) -> str:
    """``10.3-multi-head-attention`` -> ``10.3``."""
    return assignment.split("-", 1)[0]


def section_order(assignment: str) -> tuple[int, ...]:
    """A sort key that puts 10.2 before 10.10."""
    return tuple(int(n) for n in re.findall(r"\d+", section_of(assignment)))


def assignment_folders(source: Path | None = None) -> list[Path]:
    """The assignment folders under ``source`` (default ``solutions/``; or ``notebooks/``):
    those holding a notebook, in section order."""
    source = source or solutions_dir()
    if not source.is_dir():
        return []
    folders = [p for p in source.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))]
    return sorted(folders, key=lambda p: (section_order(p.name), p.name))


def assignment_names(source: Path | None = None) -> list[str]:
    """Names of :func:`assignment_folders`, in section order."""
    return [p.name for p in assignment_folders(source)]


@dataclass(frozen=True)
class CourseLayout:
    """The folders of an nbgrader course at ``root`` (the scratch courses the grader makes,
    one per submission or template, and the course itself), as nbgrader's defaults and
    grader/nbgrader_config.py name them."""

    root: Path

    def source(self, assignment: str) -> Path:
        return self.root / SOLUTIONS / assignment

    def release(self, assignment: str) -> Path:
        return self.root / RELEASE / assignment

    def submitted(self, student: str, assignment: str) -> Path:
        return self.root / "submitted" / student / assignment

    def autograded(self, student: str, assignment: str) -> Path:
        return self.root / "autograded" / student / assignment

    def feedback(self, student: str, assignment: str) -> Path:
        return self.root / "feedback" / student / assignment

    @property
    def gradebook(self) -> Path:
        return self.root / GRADEBOOK

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.gradebook}"


def course_config_file(root: Path | None = None):
    """The whole nbgrader configuration of the course at ``root`` (default
    :func:`course_root`): grader/nbgrader_config.py, then the course's own
    ``nbgrader_config.py`` over it (its course id, its late policy, ...)."""
    from traitlets.config import PyFileConfigLoader

    config = PyFileConfigLoader(NBGRADER_CONFIG.name, path=str(NBGRADER_CONFIG.parent)).load_config()
    own = (root or course_root()) / "nbgrader_config.py"
    if own.is_file():
        config.merge(PyFileConfigLoader(own.name, path=str(own.parent)).load_config())
    return config


def course_id(root: Path | None = None) -> str:
    """nbgrader's course id, as the course's configuration sets it (``COURSE_ID`` if not)."""
    return course_config_file(root).CourseDirectory.get("course_id") or COURSE_ID


def nbgrader_config(root: Path, db_url: str | None = None):
    """The course's nbgrader configuration (:func:`course_config_file`), on the course folder
    ``root`` and its gradebook (or ``db_url``)."""
    config = course_config_file(root)
    config.CourseDirectory.root = str(root)
    config.CourseDirectory.course_id = config.CourseDirectory.get("course_id") or COURSE_ID
    config.CourseDirectory.db_url = db_url or CourseLayout(root).db_url
    return config


def course_package_dir() -> Path:
    """``course/``: the helpers the notebooks import (shipped to learners); raises
    :class:`ShadowedPackage` when Python imported another ``course`` than this checkout's."""
    import course

    found = getattr(course, "__file__", None)
    folder = Path(found).resolve().parent if found else None
    if folder is None or not (folder / "checking").is_dir():
        where = found or ", ".join(getattr(course, "__path__", [])) or "an unknown place"
        raise ShadowedPackage(
            f"Python imported the course helpers ('course') from {where}, which is not the "
            f"course's package (expected {PACKAGE_DIR.parent / 'course'}). Most often a folder "
            "named 'course' (a clone of the course, say) sits in the folder you ran from and "
            "hides the package: run from inside the clone (cd into it), or rename the clone, "
            "or set PYTHONPATH to the clone's folder.")
    return folder


def data_dirs() -> list[Path]:
    """The course data: ``data/`` as the course package defines it, and ``COURSE_DATA_DIR``."""
    from course.translation import DATA_DIR

    extra = os.environ.get("COURSE_DATA_DIR")
    return [DATA_DIR, *([Path(extra)] if extra else [])]


def grading_packages() -> list[Path]:
    """The folders of the code that grades: the grader and the course helpers."""
    return [PACKAGE_DIR, course_package_dir()]


def import_roots() -> list[str]:
    """The folders that hold the ``grader`` and ``course`` packages this process uses: the
    grading workers and the kernels import from there too, whatever else is installed."""
    return list(dict.fromkeys(str(p.parent) for p in grading_packages()))


def with_python_tools(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's folder first on PATH: nbgrader runs ``alembic`` by
    name when it creates a gradebook, and a virtual environment that was not activated
    does not have it on PATH."""
    tools = str(Path(sys.executable).parent)
    parts = env.get("PATH", "").split(os.pathsep)
    return env if tools in parts else {**env, "PATH": os.pathsep.join([tools, *parts])}
