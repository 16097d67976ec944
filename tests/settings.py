"""What the test modules share besides fixtures (conftest.py holds the fixtures, and no
test module imports it): the checkout, and how the planted batch is graded."""

from __future__ import annotations

from samples import ROOT
from tests.submissions import planted

__all__ = ["GRADING", "ROOT", "TIMEOUT"]

TIMEOUT = 20  # seconds per cell: long enough for a loaded CI machine to import torch
GRADING = dict(timeout=TIMEOUT, memory_mb=2500, deadlines={"*": planted.DEADLINE}, progress=False)
