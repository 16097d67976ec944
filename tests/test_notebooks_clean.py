"""Committed notebooks carry no outputs and no execution counts (scripts/check_notebooks_clean.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.settings import ROOT

REPO = ROOT
SCRIPT = REPO / "scripts" / "check_notebooks_clean.py"


def run_check(*paths: Path) -> SimpleNamespace:
    """Run the checker's main as pre-commit and CI do (in this process): its exit status and output."""
    spec = importlib.util.spec_from_file_location("check_notebooks_clean", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = script.main([str(p) for p in paths])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr="")


def write_notebook(path: Path, outputs: list[dict[str, Any]], count: int | None) -> Path:
    """A one-code-cell notebook with the given outputs and execution count."""
    cell = {
        "cell_type": "code",
        "id": "c1",
        "metadata": {},
        "source": "print('hi')",
        "outputs": outputs,
        "execution_count": count,
    }
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


STREAM = {"output_type": "stream", "name": "stdout", "text": "hi\n"}


def test_committed_notebooks_are_clean() -> None:
    """Are all notebooks under notebooks/ and solutions/ free of outputs and execution counts?"""
    result = run_check()
    assert result.returncode == 0, result.stdout + result.stderr


def test_clean_notebook_passes(tmp_path: Path) -> None:
    """Does a notebook without outputs or counts pass?"""
    result = run_check(write_notebook(tmp_path / "clean.ipynb", [], None))
    assert result.returncode == 0, result.stdout
    assert "1 notebook(s) clean" in result.stdout


def test_every_dirty_notebook_is_listed(tmp_path: Path) -> None:
    """Does the check fail and name each notebook with outputs or an execution count?"""
    with_output = write_notebook(tmp_path / "a" / "with_output.ipynb", [STREAM], None)
    with_count = write_notebook(tmp_path / "b" / "with_count.ipynb", [], 3)
    write_notebook(tmp_path / "b" / "clean.ipynb", [], None)
    result = run_check(tmp_path)
    assert result.returncode == 1, result.stdout
    assert f"{with_output}: outputs in cell(s) 0\n" in result.stdout
    assert f"{with_count}: execution counts in cell(s) 0\n" in result.stdout
    assert "clean.ipynb" not in result.stdout
    assert "2 of 3 notebook(s)" in result.stdout


def test_checkpoints_are_ignored(tmp_path: Path) -> None:
    """Are JupyterLab's .ipynb_checkpoints copies (git-ignored) left alone?"""
    write_notebook(tmp_path / ".ipynb_checkpoints" / "x-checkpoint.ipynb", [STREAM], 1)
    assert run_check(tmp_path).returncode == 0


def test_unreadable_notebook_fails(tmp_path: Path) -> None:
    """Is a notebook that is not valid JSON reported rather than passed over?"""
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    result = run_check(broken)
    assert result.returncode == 1 and "cannot read it as a notebook" in result.stdout
