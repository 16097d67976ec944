"""The fast tier's promise, enforced: a test that is neither ``slow`` nor ``browser`` fails when it
starts a kernel, an nbgrader run or a fresh Python (tests/conftest.py runs its setup and call
through :func:`guarded`). Mark such a test ``slow``: ``make test`` runs it, ``make test-fast`` does not.
"""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import re
import shlex
import subprocess
import sys

import pytest

#: Programs whose start means a kernel, an nbgrader run or a fresh Python (any word of the command
#: line, so that ``bwrap ... python -m ipykernel`` counts).
_PROGRAM = re.compile(r"(python[\d.]*|nbgrader|jupyter(-[\w-]+)?|ipykernel\w*)")


def starts_python(args, executable=None) -> str | None:
    """The program of a command line (a list or a shell string) that is a Python, a Jupyter tool or
    nbgrader, or None."""
    words = shlex.split(args) if isinstance(args, str) else [os.fspath(a) for a in args]
    if executable is not None:
        words = [os.fspath(executable), *words]
    here = os.path.realpath(sys.executable)
    for word in words:
        if _PROGRAM.fullmatch(os.path.basename(word)) or (os.sep in word and os.path.realpath(word) == here):
            return word
    return None


class FreshProcess(RuntimeError):
    """What a fast-tier test gets when it starts a Python, a kernel or nbgrader."""


@contextlib.contextmanager
def forbid_starts(test: str):
    """Within the block, starting a Python, Jupyter or nbgrader process raises FreshProcess; yields
    the list of what was refused (a caller that swallowed the error still sees it there)."""
    refused: list[str] = []
    execute_child, spawn = subprocess.Popen._execute_child, multiprocessing.util.spawnv_passfds

    def refuse(what: str):
        refused.append(what)
        return FreshProcess(f"{test} is in the fast tier (not marked slow) and starts {what}: mark it "
                            "@pytest.mark.slow, or test the function without the process")

    def guarded_child(self, args, executable, *rest, **kwargs):
        program = starts_python(args, executable)
        if program is not None:
            raise refuse(f"{program!r} ({args!r})")
        return execute_child(self, args, executable, *rest, **kwargs)

    def guarded_spawn(path, args, passfds):
        raise refuse(f"a multiprocessing process ({path})")

    subprocess.Popen._execute_child = guarded_child
    multiprocessing.util.spawnv_passfds = guarded_spawn
    try:
        yield refused
    finally:
        subprocess.Popen._execute_child = execute_child
        multiprocessing.util.spawnv_passfds = spawn


def in_fast_tier(item) -> bool:
    return item.get_closest_marker("slow") is None and item.get_closest_marker("browser") is None


def guarded(item):
    """Run a phase of a fast-tier test (a hook wrapper's body) with process starts refused; fail
    the test if it tried one."""
    if not in_fast_tier(item):
        return (yield)
    with forbid_starts(item.nodeid) as refused:
        result = yield
    if refused:
        pytest.fail(f"{item.nodeid} is in the fast tier and started {refused[0]}: mark it slow",
                    pytrace=False)
    return result
