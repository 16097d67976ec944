"""pytest plugin of ``make gpu-check`` (:mod:`bench.gpu_check`): counts the devices the
hidden checks ran on, so the report can prove the tests exercised the GPU.

Loaded with ``-p bench.gpu_pytest_plugin``; every process (pytest-xdist workers too) writes
``{device type: calls}`` to ``$GPU_CHECK_DEVICES.<pid>`` when it ends.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

CALLS: Counter = Counter()


def pytest_configure(config) -> None:
    import grader.autograde.worker.verify  # noqa: F401 - patched below, like the checks
    import grader.checks  # noqa: F401 - every section module, so each one's name is patched
    from grader.checks import guarded_calls

    original = guarded_calls.grading_device

    def counted():
        device = original()
        CALLS[device.type] += 1
        return device

    for module in list(sys.modules.values()):
        if getattr(module, "grading_device", None) is original:
            module.grading_device = counted


def pytest_unconfigure(config) -> None:
    target = os.environ.get("GPU_CHECK_DEVICES")
    if target:
        with open(f"{target}.{os.getpid()}", "w") as out:
            json.dump(dict(CALLS), out)
