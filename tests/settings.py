"""What the test modules share besides fixtures (conftest.py holds the fixtures, and no
test module imports it): the checkout, and how the planted batch is graded."""

from __future__ import annotations

from pathlib import Path

from samples import ROOT
from tests.submissions import planted

__all__ = ["GRADING", "ROOT", "TIMEOUT", "shared_dir"]

TIMEOUT = 20  # seconds per cell: long enough for a loaded CI machine to import torch
GRADING = dict(timeout=TIMEOUT, memory_mb=2500, deadlines={"*": planted.DEADLINE}, progress=False)


def shared_dir(tmp_path_factory, request) -> Path:
    """A folder all pytest-xdist workers of the session see (the session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base
