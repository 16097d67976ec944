"""What a learner installs and reads first: the release's requirements.txt, environment.yml,
postBuild and README, the set-up cells, and the helpers' imports at load time.

The whole path, installed and opened in a browser, is tests/browser/test_learner_release.py.
"""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest
import yaml

from grader.paths import course_root
from grader.publish import bundle, learner, setup_cell

ROOT = course_root()
INSTRUCTOR = re.compile(r"\b(nbgrader|pytest)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return bundle.build_student_bundle(tmp_path_factory.mktemp("learner") / "release", through="10.4")


def test_requirements_pin_the_course_less_the_instructors_tools(release):
    """JupyterLab, ipykernel and torch at the course's pins, the helpers, no nbgrader or pytest."""
    text = (release / "requirements.txt").read_text()
    ours = (ROOT / "requirements.txt").read_text()
    for package in ("torch", "numpy", "matplotlib", "jupyterlab", "ipykernel"):
        (pin,) = re.findall(rf"^{package}==\S+$", ours, re.M)
        assert re.search(rf"^{re.escape(pin)}$", text, re.M), (package, text)
    assert "-e .\n" in text
    assert not INSTRUCTOR.search(text), text


def test_environment_speaks_to_learners(release):
    """Binder's environment: the course's conda pins less nbgrader and pytest, JupyterLab and
    ipykernel in, and no word of files a release does not hold."""
    text = (release / "environment.yml").read_text()
    names = [re.split(r"[=<>]", d)[0] for d in yaml.safe_load(text)["dependencies"]]
    assert {"jupyterlab", "ipykernel", "pytorch", "python"} <= set(names), names
    assert not INSTRUCTOR.search(text), text
    ours = [line for line in (ROOT / "environment.yml").read_text().splitlines()
            if line.startswith("  - ") and not INSTRUCTOR.search(line)]
    assert ours == [line for line in text.splitlines() if line.startswith("  - ")]
    for named in re.findall(r"[\w./-]+\.(?:txt|py|yml|toml)\b|postBuild|course/", text):
        assert (release / named).exists(), f"environment.yml names {named}, which the release lacks"


def test_both_install_paths_turn_the_news_off(release):
    """Binder's postBuild and the README's install steps both disable the news plugin."""
    assert f"jupyter labextension disable {learner.NEWS_PLUGIN}" in (release / "postBuild").read_text()
    readme = (release / "README.md").read_text()
    assert f"jupyter labextension disable {learner.NEWS_PLUGIN}" in readme


def test_readme_installs_cpu_torch_then_the_pins_then_opens_lab(release):
    """The README's shell block: a venv, PyTorch's CPU build at the course's pin, the
    requirements, then JupyterLab on the notebooks (the browser test runs these lines)."""
    from tests.browser.test_learner_release import readme_steps

    steps = readme_steps((release / "README.md").read_text())
    torch = learner.torch_pin(ROOT)
    assert steps[0].startswith("python3 -m venv .venv")
    assert f"pip install {torch} --index-url {learner.TORCH_CPU_INDEX}" in steps
    assert steps.index("pip install -r requirements.txt") > steps.index(
        f"pip install {torch} --index-url {learner.TORCH_CPU_INDEX}")
    assert steps[-1] == "jupyter lab notebooks/"
    assert "3.11" in (release / "README.md").read_text()


def test_helpers_install_the_corpus_only_when_shipped(release, tmp_path):
    """The helpers' pyproject: course and its subpackages, and data/ as course/data when the
    release holds data/ (10.6), so pip on Colab installs the corpus with the helpers."""
    text = (release / "pyproject.toml").read_text()
    (listed,) = re.findall(r"^packages = \[(.*)\]$", text, re.M)
    shipped = sorted(".".join(p.parent.relative_to(release).parts)
                     for p in release.glob("course/**/__init__.py"))
    assert sorted(name.strip('" ') for name in listed.split(",")) == shipped
    assert "course.data" not in text and not (release / "data").exists()
    full = bundle.build_student_bundle(tmp_path / "full")
    assert '"course.data" = "data"' in (full / "pyproject.toml").read_text()


SETUP_PLUMBING_LINES = 5  # comment, import sys, blank, if on Colab, the pip line
WIDTH = 88


@pytest.mark.parametrize("path", sorted((ROOT / "solutions").glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_set_up_cell_is_short_and_narrow(path):
    """The first cell a learner reads: a few lines before the imports, none wider than
    the notebook, one pip line for Colab, nbgrader's metadata kept (grade_id setup, locked)."""
    (cell,) = [c for c in nbformat.read(path, as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
    assert cell.metadata["nbgrader"]["locked"] and not cell.metadata["editable"]
    lines = cell.source.splitlines()
    first_import = next(i for i, line in enumerate(lines)
                        if line.startswith(("import math", "import contextlib")))
    assert first_import <= SETUP_PLUMBING_LINES + 1, lines[:first_import]
    assert max(len(line) for line in lines) <= WIDTH, max(lines, key=len)
    assert setup_cell.course_source(cell.source) == (bundle.DEFAULT_REPOSITORY, "main")
    assert [line.strip() for line in lines if "pip install" in line] == [
        f"%pip install -q {setup_cell.pip_source(bundle.DEFAULT_REPOSITORY, 'main')}"]


@pytest.mark.slow  # fresh Python processes that import torch
def test_no_helper_imports_torch_benchmark_when_it_loads():
    """torch.utils.benchmark warns "No CUDA runtime is found" on a CUDA build without a GPU:
    no module of course/ may import it at load (only where a measurement runs)."""
    code = ("import importlib, pkgutil, sys, course\n"
            "for m in pkgutil.walk_packages(course.__path__, 'course.'): importlib.import_module(m.name)\n"
            "print(sorted(k for k in sys.modules if k == 'torch.utils.benchmark'"
            " or k.startswith('torch.utils.benchmark.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout


def test_a_section_package_ships_every_module_it_loads(tmp_path):
    """course/visible/s10_1/ loads its exercise modules at run time (no import line names
    them): a release through 10.1 holds every one of them."""
    out = bundle.build_student_bundle(tmp_path / "release", through="10.1")
    ours = sorted(p.name for p in (ROOT / "course" / "visible" / "s10_1").glob("*.py"))
    assert len(ours) > 1
    assert sorted(p.name for p in (out / "course" / "visible" / "s10_1").glob("*.py")) == ours
