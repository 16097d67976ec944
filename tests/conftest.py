"""Fixtures shared by the test modules: the solutions' code, the graded batch, the caches.

Tiers: ``pytest -m "not slow and not browser"`` (``make test-fast``) runs what needs no
kernel, no nbgrader run, no fresh Python process and no browser; ``make test`` runs everything.
A fast-tier test that starts a kernel, nbgrader or a fresh Python fails (tests/fast_tier.py).
Tests that share a module-scoped fixture run in one xdist worker (the hooks below).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from samples import load_solution_namespace
from tests.fast_tier import guarded
from tests.settings import GRADING, shared_dir
from tests.submissions import planted


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from guarded(item))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A module whose tests share a module-scoped fixture (a release built, a kernel started, the
    sections graded) runs in one pytest-xdist worker (``--dist loadgroup``, pyproject.toml), so
    that the fixture is built once per run, not once per worker. Autouse fixtures (a thread
    setting) do not count; a test already in a group keeps it."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    if config.getoption("loadgroup", False):  # in a worker of a loadgroup run
        for item in items:
            _name_its_group(item)


def _shares_a_module_fixture(item) -> bool:
    definitions = getattr(item, "_fixtureinfo", None)
    active = [defs[-1] for defs in definitions.name2fixturedefs.values()] if definitions else []
    return any(d.scope == "module" and not d._autouse for d in active)


def _name_its_group(item) -> None:
    """Name a grouped test ``<node id>@<group>``, the name ``--dist loadgroup`` schedules by.
    pytest-xdist 3.8 means to, but sets ``item._nodeid``, which pytest 9 no longer reads."""
    from _pytest.nodeid import NodeId

    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    if groups and item.nodeid.rfind("@") <= item.nodeid.rfind("]"):
        item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(scope="module")
def solution(request) -> dict:
    """The namespace of the instructor notebook of the test module's ``ASSIGNMENT`` (its
    setup, given and solution cells), loaded when a test first needs it."""
    return load_solution_namespace(request.module.ASSIGNMENT)


@pytest.fixture(scope="session")
def cache(tmp_path_factory, request) -> Path:
    """Template gradebooks and the sandbox check, shared by every autograde run of the session."""
    path = shared_dir(tmp_path_factory, request) / "autograde-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def batch(tmp_path_factory, request, cache) -> dict:
    """Every planted submission graded once, two at a time (once per session, even when
    pytest-xdist spreads the tests over several processes). Read it, never write into it."""
    from filelock import FileLock

    from grader import results as report
    from grader.autograde.host.file_guard import Guard, grading_folders
    from grader.autograde.host.options import Options
    from grader.autograde.host.run import autograde

    if shutil.which("bwrap") is None:  # without it the hostile ones would write the checkout
        pytest.skip("bubblewrap is not installed: make sandbox-deps (apt-get install bubblewrap)")
    shared = shared_dir(tmp_path_factory, request)
    root, out, done = shared / "planted", shared / "graded", shared / "autograde-batch.json"
    with FileLock(str(shared / "autograde-batch.lock")):
        if not done.exists():
            started, guard = time.monotonic(), Guard(grading_folders())
            summary = autograde(planted.build(root), out, Options(jobs=2, cache=cache, **GRADING))
            done.write_text(json.dumps({"graded": summary.graded, "counts": summary.counts,
                                        "text": summary.text(), "changed": guard.changes(),
                                        "elapsed": time.monotonic() - started}))
        summary = json.loads(done.read_text())
    text = (out / "grades.csv").read_text()
    return {"root": root, "out": out, "summary": summary, "csv": text,
            "results": report.load_results(out), "elapsed": summary["elapsed"]}
