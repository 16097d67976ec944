"""Build what a course publishes to learners: ``python -m grader student-bundle OUT``.

The bundle is a folder ready to push as the public student repository: the learner
notebooks, the ``course`` helper package, ``data/``, ``environment.yml`` and Binder's
``postBuild``, and a learner README with Binder and Colab badges. Nothing of
``solutions/``, the hidden tests or ``grader/`` goes in, and :func:`find_leaks` proves it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

from grader.errors import PublishError
from grader.paths import course_root

DEFAULT_REPOSITORY = "transformer-course/transformer-course"
COPIED = ("notebooks", "course", "data", "environment.yml", "postBuild")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "train_reference.py")

STUDENT_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "transformer-course-helpers"
version = "0.1.0"
description = "Helpers imported by the Transformer course notebooks."
requires-python = ">=3.9"
dependencies = ["torch>=2.1", "numpy", "matplotlib", "tqdm"]

[tool.setuptools.packages.find]
include = ["course*"]
"""


def notebook_links(root: Path) -> list[tuple[str, str]]:
    """(title, path relative to ``root``) of every learner notebook, in section order."""
    links = []
    for path in sorted((root / "notebooks").glob("*/*.ipynb")):
        title = path.parent.name.replace("-", " ", 1).replace("-", " ")
        links.append((title, path.relative_to(root).as_posix()))
    return links


def badges(repository: str, branch: str = "main", root: Path | None = None) -> str:
    """Markdown: one Binder badge for the course, one Colab badge per notebook."""
    binder = (f"[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/"
              f"{repository}/{branch}?urlpath=lab/tree/notebooks)")
    rows = ["| notebook | Colab |", "|---|---|"]
    for title, path in notebook_links(root or course_root()):
        colab = f"https://colab.research.google.com/github/{repository}/blob/{branch}/{path}"
        rows.append(f"| [{title}]({path}) | [![Open In Colab]"
                    f"(https://colab.research.google.com/assets/colab-badge.svg)]({colab}) |")
    return binder + "\n\n" + "\n".join(rows) + "\n"


def learner_readme(repository: str, branch: str, root: Path) -> str:
    return f"""# The Transformer, hands on: learner notebooks

Six notebooks in which you build the Transformer from its parts in PyTorch; every piece
you write is checked at once against PyTorch's own modules.

Open the whole course on Binder, or one notebook on Colab:

{badges(repository, branch, root)}
On your own machine: `pip install -e .` (with PyTorch 2.1 or newer), then
`jupyter lab notebooks/`. Run each notebook top to bottom, setup cell first.
"""


def build_student_bundle(out: Path, repository: str = DEFAULT_REPOSITORY,
                         branch: str = "main", root: Path | None = None) -> Path:
    """Write the student release of the course at ``root`` (default: :func:`course_root`)
    into ``out``, which must not exist or be empty."""
    root = root or course_root()
    if out.exists() and any(out.iterdir()):
        raise PublishError(f"{out} is not empty: choose a new folder (nothing is overwritten).")
    if not any((root / "notebooks").glob("*/*.ipynb")):
        raise PublishError("notebooks/ has no learner notebooks: run `python -m grader generate`.")
    out.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=IGNORED)
        elif source.exists():
            shutil.copy2(source, out / name)
    (out / "pyproject.toml").write_text(STUDENT_PYPROJECT)
    (out / "README.md").write_text(learner_readme(repository, branch, root))
    leaks = find_leaks(out, root / "solutions")
    if leaks:
        shutil.rmtree(out)
        raise PublishError("The student bundle would leak instructor material:\n" + "\n".join(leaks))
    return out


# ---------------------------------------------------------------- leak detection

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "grader.checks", "from grader",
           "import grader")


SOLUTION_BLOCK = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def solution_lines(notebook: Path, min_length: int = 12) -> set[str]:
    """Non-trivial code lines that only the solutions of an instructor notebook hold.

    Lines that also stand outside the solution blocks (in given code, say) are public.
    """
    solution, public = set(), set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for block in SOLUTION_BLOCK.findall(cell.source):
            solution.update(line.strip() for line in block.splitlines())
        public.update(line.strip() for line in SOLUTION_BLOCK.sub("", cell.source).splitlines())
    return {line for line in solution - public
            if len(line) >= min_length and not line.startswith("#")}


def _code_text(path: Path) -> str:
    """The code a learner receives in a file: code cells of notebooks, whole text otherwise."""
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        return "\n".join(c.source for c in cells if c.cell_type == "code")
    return path.read_text(errors="replace")


def _secret_lines(path: Path, bundle: Path, solutions: Path) -> set[str]:
    """Solution lines that must not appear in ``path``.

    A learner notebook must not hold its own solutions (earlier sections' building blocks
    are given on purpose); helper code must hold no solution of any section.
    """
    if path.suffix == ".ipynb":
        source = solutions / path.relative_to(bundle / "notebooks")
        return solution_lines(source) if source.exists() else set()
    return set().union(*(solution_lines(nb, min_length=25) for nb in solutions.glob("*/*.ipynb")))


def find_leaks(bundle: Path, solutions: Path) -> list[str]:
    """Every file or line of the bundle that gives away solutions, hidden tests or checks."""
    leaks = [f"{p.relative_to(bundle)}: instructor folder" for p in bundle.rglob("*")
             if p.is_dir() and p.name in {"solutions", "grader", "tests", "autograded", "submitted"}]
    for path in sorted(bundle.rglob("*")):
        if not path.is_file() or path.suffix not in {".ipynb", ".py", ".md", ".txt", ".yml", ".toml"}:
            continue
        text = _code_text(path)
        leaks += [f"{path.relative_to(bundle)}: {m!r}" for m in MARKERS if m in text]
        if path.suffix in {".ipynb", ".py"}:
            leaks += [f"{path.relative_to(bundle)}: solution line {line!r}"
                      for line in sorted(_secret_lines(path, bundle, solutions)) if line in text]
    return leaks
