"""docs/grading.md, "On a JupyterHub", followed on a real JupyterHub on this machine.

The page's two blocks as written: the bash block (the learners' environment, and the
week's helpers installed from the student release, here ``student-bundle --through 10.1``)
runs as root, and its ``jupyterhub_config.py`` block is the hub's configuration, with only
where the hub listens and keeps its files added. The hub runs from an environment of its
own without PyTorch (``make hub-deps``), with PAM and the local process spawner.

A learner (a Unix user with a password) logs in over HTTP, starts their server, fetches
10.1 through the Assignments tab's API, runs the notebook's set-up cell in a kernel of
their server over its websocket (it imports PyTorch and the helpers: the point of the
page), saves an answer and submits; the instructor collects it with nbgrader.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import nbformat
import pytest
import requests
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

import samples
from grader.publish.learner import torch_pin
from tests.settings import ROOT
from tests.submissions import planted
from tests.unix_course import COURSE_ID, EXCHANGE_VENV, exchange_course, need_root

pytestmark = pytest.mark.slow

PAGE = ROOT / "docs" / "grading.md"
SECTION = "### On a JupyterHub with nbgrader's exchange"
HUB_VENV = Path("/opt/course-jupyterhub")  # the Makefile's default HUB_VENV
ASSIGNMENT = planted.ASSIGNMENT
NOTEBOOK = samples.notebook_name(ASSIGNMENT)
GROUP = "transformer-course"  # the page's learners' Unix group
RELEASE = "../student-repo"
WEEKLY = "# each week"  # the comment above the bash block's weekly lines  # the page's student release
PASSWORD = "a-password-4-the-test"
ANSWER = "# the learner's answer\n"
#: Run after the set-up cell: what the kernel imported, and from where.
REPORT = "import course, torch, sys; print(torch.__version__, course.__file__, sys.executable)"


def page_block(kind: str) -> str:
    """The one ``kind`` block of the page's JupyterHub section."""
    section = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(rf"```{kind}\n(.*?)```", section, flags=re.S)
    assert len(blocks) == (2 if kind == "bash" else 1), f"{PAGE}: the section's {kind} blocks changed"
    return blocks[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def root(*command: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def set_up_learners_environment(release: Path) -> None:
    """The page's weekly lines of its bash block as root (``make exchange-deps`` made the
    environment as its first lines do), ``../student-repo`` being this test's release. The
    helpers a run before left are uninstalled first: only the page's step may bring them."""
    subprocess.run([f"{EXCHANGE_VENV}/bin/pip", "uninstall", "--quiet", "--yes",
                    "transformer-course-helpers"], capture_output=True)
    weekly = page_block("bash").split(WEEKLY, 1)[1].split("\n", 1)[1]
    for line in weekly.splitlines():
        if line.strip() and not line.startswith("#"):
            root("bash", "-c", line.replace(RELEASE, str(release)))


class Hub:
    """JupyterHub with the page's configuration, in ``base``; stopped by ``stop``."""

    def __init__(self, base: Path, group: str):
        self.url = f"http://127.0.0.1:{free_port()}"
        config = base / "jupyterhub_config.py"
        config.write_text(page_block("python").replace(f"{{{GROUP!r}}}", f"{{{group!r}}}") + f"""
c.JupyterHub.bind_url = {self.url!r}
c.JupyterHub.hub_port = {free_port()}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.command = [{str(HUB_VENV / "bin" / "configurable-http-proxy")!r}]
c.JupyterHub.db_url = "sqlite:///{base}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{base}/jupyterhub_cookie_secret"
c.Spawner.start_timeout = c.Spawner.http_timeout = 90
""")
        self.log = base / "jupyterhub.log"
        self.process = subprocess.Popen([str(HUB_VENV / "bin" / "jupyterhub"), "-f", str(config)],
                                        cwd=base, stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        self.wait(lambda: requests.get(f"{self.url}/hub/api", timeout=5).ok, "the hub to answer")

    def wait(self, ready, what: str, seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"the hub stopped:\n{self.log.read_text()}"
            try:
                if ready():
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"waited {seconds} s for {what}:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def log_in(hub: Hub, name: str) -> dict:
    """Log in with the password form as a browser does; an API token from that session."""
    session = requests.Session()
    session.get(f"{hub.url}/hub/login", timeout=10).raise_for_status()
    xsrf = session.cookies["_xsrf"]
    done = session.post(f"{hub.url}/hub/login", data={"username": name, "password": PASSWORD,
                                                        "_xsrf": xsrf}, allow_redirects=False, timeout=30)
    assert done.status_code == 302, f"{name} could not log in: {done.status_code}\n{hub.log.read_text()}"
    xsrf = [c.value for c in session.cookies if c.name == "_xsrf"][-1]  # login renews it
    made = session.post(f"{hub.url}/hub/api/users/{name}/tokens", json={"expires_in": 600},
                        headers={"X-XSRFToken": xsrf}, timeout=10)
    assert made.status_code == 201, made.text
    return {"Authorization": f"token {made.json()['token']}"}


async def run_cells(url: str, headers: dict, sources: list[str]) -> list[dict]:
    """Each of ``sources`` run in turn in a new Python 3 kernel of the server at ``url``:
    per cell, its execute_reply's content and what it printed (stdout)."""
    started = requests.post(f"{url}api/kernels", json={"name": "python3"}, headers=headers, timeout=60)
    assert started.status_code == 201, started.text
    kernel = started.json()["id"]
    channels = await websocket_connect(HTTPRequest(
        f"{url.replace('http', 'ws', 1)}api/kernels/{kernel}/channels", headers=headers,
        connect_timeout=60))
    results = []
    try:
        for source in sources:
            msg_id = uuid.uuid4().hex
            await channels.write_message(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                           "session": "test", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
            # the reply comes on shell, the printed text on iopub: the two may arrive in either
            # order, and iopub's "idle" says everything the cell printed has been sent
            printed, reply, idle = "", None, False
            while reply is None or not idle:
                message = json.loads(await asyncio.wait_for(channels.read_message(), 120))
                if message.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if message["msg_type"] == "stream":
                    printed += message["content"]["text"]
                elif message["msg_type"] == "execute_reply":
                    reply = message["content"]
                elif message["msg_type"] == "status":
                    idle = message["content"]["execution_state"] == "idle"
            results.append({"reply": reply, "stdout": printed})
    finally:
        channels.close()
        requests.delete(f"{url}api/kernels/{kernel}", headers=headers, timeout=30)
    return results


@pytest.fixture(scope="module")
def course():
    need_root("the JupyterHub test")
    if not shutil.which("chpasswd") or not shutil.which("groupadd"):
        pytest.skip("the JupyterHub test sets Unix passwords: chpasswd and groupadd are missing")
    subprocess.run(["make", "-s", "-C", str(ROOT), "hub-deps", f"HUB_VENV={HUB_VENV}",
                    f"EXCHANGE_VENV={EXCHANGE_VENV}"], check=True, timeout=900)
    with exchange_course(["h"]) as made:
        yield made


def test_a_learner_works_through_the_hub(course):
    """Log in, fetch 10.1, run its set-up cell in a kernel of the hub, save, submit: does the
    kernel import PyTorch as pinned and the helpers of the student release, and does the
    instructor collect what the learner saved?"""
    users, base, (learner,) = course["users"], course["base"], course["learners"]
    group = f"cgstudents{learner[3:]}"
    root("groupadd", group)
    hub = None
    try:
        root("usermod", "--append", "--groups", group, learner)
        subprocess.run(["chpasswd"], input=f"{learner}:{PASSWORD}\n", text=True, check=True)
        users.run(course["instructor"], "nbgrader", "release_assignment", ASSIGNMENT, cwd=course["course"])
        release = base / "student-repo"
        root(sys.executable, "-m", "grader", "student-bundle", str(release), "--through", "10.1",
             "--repository", "example-org/transformer-course", "--branch", "main")
        set_up_learners_environment(release)

        hub = Hub(base, group)
        headers = log_in(hub, learner)
        started = requests.post(f"{hub.url}/hub/api/users/{learner}/server", headers=headers, timeout=30)
        assert started.status_code in (201, 202), started.text
        hub.wait(lambda: requests.get(f"{hub.url}/hub/api/users/{learner}", headers=headers, timeout=10)
                 .json()["servers"].get("", {}).get("ready"), f"{learner}'s server")
        server = f"{hub.url}/user/{learner}/"

        # fetch, as the Assignments tab does
        fetched = requests.post(f"{server}assignments/fetch", headers=headers, timeout=60,
                                data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
        assert fetched.ok and fetched.json()["success"], fetched.text
        contents = f"{server}api/contents/{ASSIGNMENT}/{NOTEBOOK}"
        got = requests.get(contents, headers=headers, timeout=30)
        assert got.ok, got.text
        nb = nbformat.from_dict(got.json()["content"])
        (setup,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]

        # the set-up cell in a kernel of the learner's server
        ran = asyncio.run(run_cells(server, headers, [setup.source, REPORT]))
        for cell in ran:
            reply = cell["reply"]
            assert reply["status"] == "ok", f"hub's kernel: {reply.get('ename')}: {reply.get('evalue')}"
        version, helpers, python = ran[1]["stdout"].split()
        assert version.split("+")[0] == torch_pin(ROOT).split("==")[1]
        assert Path(python).parent == EXCHANGE_VENV / "bin"
        assert Path(helpers).is_relative_to(EXCHANGE_VENV)  # the release's helpers, installed

        # save an answer, submit, collect
        nb.cells.append(nbformat.v4.new_markdown_cell(ANSWER))
        saved = requests.put(contents, headers=headers, timeout=30,
                             json={"type": "notebook", "content": nb})
        assert saved.ok, saved.text
        submitted = requests.post(f"{server}assignments/submit", headers=headers, timeout=60,
                                  data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
        assert submitted.ok and submitted.json()["success"], submitted.text
        users.run(course["instructor"], "nbgrader", "collect", ASSIGNMENT, cwd=course["course"])
        collected = course["course"] / "submitted" / learner / ASSIGNMENT / NOTEBOOK
        assert nbformat.read(collected, as_version=4).cells[-1].source == ANSWER
    finally:
        if hub:
            hub.stop()
        subprocess.run(["groupdel", group], capture_output=True)
