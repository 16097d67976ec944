"""The files of the student release that set up a learner's machine, and its README.

Pins stay in one place: the learner's ``requirements.txt`` and ``environment.yml`` are the
course's own (``requirements.txt``, ``environment.yml`` at the root) less what only
instructors use (nbgrader, pytest). Learners get no nbgrader at all: "where you stand",
the last cell of every notebook, already lists each exercise with its points and what its
check said (what nbgrader's Validate button would tell them), and nbgrader's JupyterLab
extension would show them the instructor's menus (Formgrader, Create Assignment).

Both install paths turn off JupyterLab's news pop-up (``NEWS_PLUGIN``): Binder's
``postBuild`` (copied from the course's root) and the README's install steps.
"""

from __future__ import annotations

import re
from pathlib import Path

#: Packages only instructors use: grading, and the course's own test suite.
INSTRUCTOR_PACKAGES = ("nbgrader", "pytest")
#: JupyterLab's plugin that asks whether to fetch Jupyter news, then shows it.
NEWS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
#: PyTorch's own index of CPU-only wheels (Linux, Windows, macOS).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"

REQUIREMENTS_HEAD = """\
# Everything the course notebooks need, at the versions the course is tested with, and the
# course helpers themselves (-e .). See README.md: install PyTorch's CPU build first on a
# computer without an NVIDIA GPU.
"""

ENVIRONMENT_HEAD = """\
# The environment Binder builds for the course notebooks, from conda-forge: Python, a
# CPU-only PyTorch (a cpu_* build, no CUDA packages), JupyterLab and what the course helpers
# use (matplotlib-base is matplotlib without the Qt GUI toolkits). Binder then runs
# postBuild, which installs the helpers (course/) and turns off JupyterLab's news pop-up.
"""


def _package(line: str) -> str:
    """The package a requirements or environment.yml line names ('' for none)."""
    match = re.match(r"^\s*(?:-\s+)?([A-Za-z0-9_.-]+)", line.split("#", 1)[0])
    return match[1].lower() if match else ""


def requirements(root: Path) -> str:
    """The learner's ``requirements.txt``: the course's pins less the instructors' tools."""
    pins = [line for line in (root / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")
            and _package(line) not in INSTRUCTOR_PACKAGES]
    return REQUIREMENTS_HEAD + "\n".join(pins) + "\n-e .\n"


def environment(root: Path) -> str:
    """The learner's ``environment.yml``: the course's, less the instructors' tools, with a
    header that speaks to learners."""
    lines = (root / "environment.yml").read_text().splitlines()
    body = [line for line in lines if not line.startswith("#")
            and _package(line) not in INSTRUCTOR_PACKAGES]
    return ENVIRONMENT_HEAD + "\n".join(body) + "\n"


def torch_pin(root: Path) -> str:
    """``torch==X.Y.Z`` as the course's ``requirements.txt`` pins it."""
    for line in (root / "requirements.txt").read_text().splitlines():
        if _package(line) == "torch":
            return line.split("#", 1)[0].strip()
    raise ValueError("requirements.txt pins no torch")


def pyproject(packages: list[str], data: bool) -> str:
    """The helpers' ``pyproject.toml``: ``packages`` (``course``, its subpackages) and, with
    ``data``, the release's data/ as ``course/data`` once installed (pip on Colab installs no
    data/ beside the helpers; :func:`course.translation.data_path` looks in both).

    Dependencies are loose on purpose: on Colab, pip keeps the torch Colab has.
    """
    listed = ", ".join(f'"{name}"' for name in [*packages, *(["course.data"] if data else [])])
    mapped = ('package-dir = {"course.data" = "data"}\n'
              'package-data = {"course.data" = ["*.tsv", "make_corpus.py"]}\n'
              if data else "")
    return f"""\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "transformer-course-helpers"
version = "0.1.0"
description = "Helpers imported by the Transformer course notebooks."
requires-python = ">=3.11"
dependencies = ["torch>=2.1", "numpy", "matplotlib", "tqdm", "regex"]

[tool.setuptools]
packages = [{listed}]
{mapped}"""


def install_steps(root: Path) -> str:
    """The shell lines of the README that install the course and open it (one block)."""
    return f"""\
python3 -m venv .venv
source .venv/bin/activate
pip install {torch_pin(root)} --index-url {TORCH_CPU_INDEX}
pip install -r requirements.txt
jupyter labextension disable {NEWS_PLUGIN}
jupyter lab notebooks/
"""


def readme(badges: str, root: Path, published: list[str], complete: bool) -> str:
    """The release's README: open the course, on Binder, Colab or one's own computer."""
    so_far = "" if complete else (
        f"\nPublished so far: {', '.join(published)}. The next sections appear here as the\n"
        "course goes on; what you already have never changes.\n")
    return f"""# The Transformer, hands on: learner notebooks

Notebooks in which you build the Transformer from its parts in PyTorch; every piece you
write is checked at once against PyTorch's own modules.
{so_far}
Open the whole course on Binder, or one notebook on Colab:

{badges}
## On your own computer

You need Python 3.11 or newer (`python3 --version`) and about 1 GB of disk. In a terminal,
in this folder:

```bash
{install_steps(root)}```

On Windows, activate with `.venv\\Scripts\\activate` instead of the `source` line.
The first `pip` line installs PyTorch's CPU build (about 200 MB) from PyTorch's own index;
without it, pip takes PyPI's build, which on Linux is the CUDA one (several GB). On a
computer with an NVIDIA GPU you may leave that line out. The `labextension` line turns off
JupyterLab's news pop-up. Next time, only the `source` line and `jupyter lab notebooks/`.

Run each notebook top to bottom, the set-up cell first. The test cell after each exercise
tells you what is off; the last cell, "where you stand", lists every exercise with its
points and what its test said.
"""
