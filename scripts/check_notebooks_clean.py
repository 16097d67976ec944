#!/usr/bin/env python3
"""Fail when a committed notebook carries outputs or execution counts.

Usage: ``python scripts/check_notebooks_clean.py [PATH ...]``. PATHs are notebooks or
folders searched for ``*.ipynb``; without any, ``notebooks/`` and ``solutions/`` of this
repository are checked. Every dirty notebook is listed (with its cells), and the exit
status is 1; it is 0 when all are clean. Standard library only, so pre-commit can run it
as a local hook. Clear a notebook with
``jupyter nbconvert --clear-output --inplace NOTEBOOK``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = ("notebooks", "solutions")


def notebooks(paths: Iterable[Path]) -> Iterator[Path]:
    """Every ``.ipynb`` named or found below the given paths, checkpoints left out, sorted."""
    found: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found.update(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        elif path.suffix == ".ipynb":
            found.add(path)
    yield from sorted(found)


def notebook_problems(path: Path) -> list[str]:
    """What the notebook at ``path`` still carries: outputs, execution counts (empty if clean)."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as error:
        return [f"cannot read it as a notebook: {error}"]
    with_outputs = [i for i, cell in enumerate(cells) if cell.get("outputs")]
    with_counts = [i for i, cell in enumerate(cells) if cell.get("execution_count") is not None]
    problems = []
    if with_outputs:
        problems.append(f"outputs in cell(s) {listing(with_outputs)}")
    if with_counts:
        problems.append(f"execution counts in cell(s) {listing(with_counts)}")
    return problems


def listing(indices: list[int]) -> str:
    """Cell indices as ``0, 3, 5``."""
    return ", ".join(map(str, indices))


def main(argv: list[str] | None = None) -> int:
    """Check the notebooks; print the dirty ones; return 1 if any is dirty, else 0."""
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or [REPO / d for d in DEFAULT_DIRS]
    checked, dirty = 0, 0
    for path in notebooks(paths):
        checked += 1
        problems = notebook_problems(path)
        if problems:
            dirty += 1
            print(f"{path}: " + "; ".join(problems))
    if dirty:
        print(f"{dirty} of {checked} notebook(s) have outputs or execution counts; clear them with")
        print("  jupyter nbconvert --clear-output --inplace NOTEBOOK")
        return 1
    print(f"{checked} notebook(s) clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
