"""Does `make lab`, the README's command for learners, serve JupyterLab where it is run
(as root in a container, with no display)?"""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fetch(url: str, deadline: float, server: subprocess.Popen) -> tuple[int, str]:
    """GET ``url`` once the server answers (before ``deadline``, while it runs)."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def lab_command(env: dict, venv: Path, *args: str) -> list[str]:
    """`make lab`'s command for ``env``, this environment's venv (-o: its stamp is not remade)."""
    return ["make", "-o", str(venv / ".installed"), "lab", f"VENV={venv}", *args]


def without_display() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}


@pytest.mark.parametrize("display", [None, ":0"], ids=["no display", "display"])
def test_make_lab_flags_follow_the_machine(display):
    """Does `make lab` add --allow-root exactly for root, and open no browser (listening on all
    addresses) exactly where there is no display?"""
    env = without_display() | ({"DISPLAY": display} if display else {})
    shown = subprocess.run([*lab_command(env, Path(sys.prefix)), "-n"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True).stdout.split()
    assert ("--allow-root" in shown) == (os.geteuid() == 0), shown
    headless = display is None and sys.platform != "darwin"
    assert ("--no-browser" in shown) == ("--ip=0.0.0.0" in shown) == headless, shown


@pytest.mark.slow
def test_make_lab_serves_jupyterlab():
    """Does `make lab` start JupyterLab on notebooks/ where it runs here (as root in CI, with no
    display), answering /lab with its token? (The time is the server's start: seconds when idle.)"""
    port, token = free_port(), secrets.token_hex(8)
    env = without_display()
    command = lab_command(env, Path(sys.prefix), f"LAB_ARGS=--port={port} --ServerApp.port_retries=0 "
                                                 f"--IdentityProvider.token={token}")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        status, page = fetch(f"http://127.0.0.1:{port}/lab?token={token}", time.monotonic() + 90, server)
    except OSError as error:
        os.killpg(server.pid, signal.SIGTERM)
        output = server.communicate(timeout=30)[0]
        pytest.fail(f"`make lab` did not serve /lab ({error}); its output:\n{output[-3000:]}")
    os.killpg(server.pid, signal.SIGTERM)
    output = server.communicate(timeout=30)[0]
    assert status == 200 and "JupyterLab" in page, output[-3000:]
    assert f"{os.sep}notebooks" in output, output[-3000:]  # serving the learner notebooks' folder
