"""Fixtures for the browser tests: a real JupyterLab server and Debian's headless Chromium.

Nothing here downloads a browser: Playwright drives ``/usr/bin/chromium`` (Debian's
``chromium`` package). Without Chromium or Playwright the tests skip, unless the ``CI``
environment variable is set, where a missing tool is a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.lab import CHROMIUM_ARGS, free_port, stop, wait_until_up

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
OUTPUT_DIR = REPO / "tests" / "output"


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``browser`` marker so ``-m browser`` / ``-m 'not browser'`` work."""
    config.addinivalue_line("markers", "browser: drives a real JupyterLab in headless Chromium")


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``; under CI (env ``CI`` set) a missing tool is a failure instead."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_executable() -> Path:
    """Debian's Chromium, or a skip (a failure under CI) when it is not installed."""
    if not CHROMIUM.exists():
        skip_or_fail(f"{CHROMIUM} not found: apt-get install -y chromium chromium-driver")
    return CHROMIUM


@pytest.fixture(scope="session")
def playwright_api() -> Any:
    """Playwright's sync API module, or a skip (a failure under CI) when it is missing."""
    try:
        from playwright import sync_api
    except ImportError:
        skip_or_fail("Python package 'playwright' is not installed: pip install playwright")
    return sync_api


@pytest.fixture(scope="session")
def output_dir() -> Path:
    """Where screenshots go (``tests/output/``, git-ignored)."""
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    return OUTPUT_DIR


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab server: where it listens, its token and its root directory."""

    url: str
    token: str
    root_dir: Path
    log: Path

    def lab_url(self, path: str = "") -> str:
        """The browser address of ``lab/tree/<path>`` with the token in the query."""
        return f"{self.url}lab/tree/{path}?token={self.token}"


def lab_settings(settings_dir: Path) -> None:
    """Write user settings: render every cell (no windowing) and don't check for news."""
    notebook = settings_dir / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True, exist_ok=True)
    (notebook / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}\n')
    news = settings_dir / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}\n'
    )


def lab_command(port: int, token: str, root_dir: Path, state_dir: Path) -> list[str]:
    """The command line of a local, token-protected JupyterLab that opens no browser."""
    return [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        f"--LabApp.user_settings_dir={state_dir / 'settings'}",
        f"--LabApp.workspaces_dir={state_dir / 'workspaces'}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])


@pytest.fixture
def lab_server(tmp_path: Path) -> Callable[[Path], LabServer]:
    """A factory: ``lab_server(root_dir)`` starts JupyterLab there; all are stopped afterwards."""
    started: list[subprocess.Popen] = []

    def start(root_dir: Path) -> LabServer:
        port, token = free_port(), secrets.token_hex(16)
        state = tmp_path / f"lab-state-{port}"
        lab_settings(state / "settings")
        env = {**os.environ, "JUPYTER_PLATFORM_DIRS": "1", "PYTHONUNBUFFERED": "1"}
        env["JUPYTER_RUNTIME_DIR"] = str(state / "runtime")
        log = state / "server.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                lab_command(port, token, root_dir, state),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=root_dir,
            )
        started.append(process)
        url = f"http://127.0.0.1:{port}/"
        wait_until_up(url, token, process, log)
        return LabServer(url=url, token=token, root_dir=root_dir, log=log)

    yield start
    for process in started:
        stop(process)


@pytest.fixture
def chromium_page(chromium_executable: Path, playwright_api: Any, tmp_path: Path) -> Iterator[Any]:
    """A Playwright page in headless Debian Chromium with a fresh user-data directory."""
    profile = tmp_path / "chromium-profile"
    with playwright_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(chromium_executable),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 1400},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            yield page
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)
