"""What the browser tests share besides their fixtures: Chromium's flags, a free port, starting
and stopping a server (test modules import these from here, never from conftest)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SERVER_START_TIMEOUT_S = 90.0
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, token: str, process: subprocess.Popen, log: Path) -> None:
    """Poll ``/api/status`` until the server answers; fail with its log if it dies or stalls."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S}s:\n{log.read_text()}")


def stop(process: subprocess.Popen) -> None:
    """Stop the server we started (SIGTERM, then SIGKILL after 10 s)."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
