"""A course on nbgrader's exchange with real Unix users, as on a shared JupyterHub: what
tests/test_exchange.py and tests/test_hub.py share.

An instructor and learners, each a Unix user with a private home, an exchange folder of
mode 1777, and the instructor's copy of the course. The users run nbgrader from the
learners' environment outside any home (``make exchange-deps``: a venv under a mode-700
home cannot be run by another user), with its ``bin`` on PATH (nbgrader runs ``alembic``
by name when it makes a gradebook). Needs root, useradd and runuser.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader.paths import COURSE_ID
from tests.settings import ROOT

EXCHANGE_VENV = Path("/opt/course-exchange")  # the Makefile's default EXCHANGE_VENV
COURSE_FILES = ["nbgrader_config.py", "grader/nbgrader_config.py", "notebooks/10.1-self-attention",
                "solutions/10.1-self-attention"]


class Users:
    """Unix users made for the test, removed afterwards with their homes."""

    def __init__(self, base: Path):
        self.base, self.names = base, []
        self.path = f"{EXCHANGE_VENV}/bin:/usr/local/bin:/usr/bin:/bin"

    def add(self, role: str) -> str:
        name = f"cg{role}{os.getpid() % 100000}"
        subprocess.run(["useradd", "--create-home", "--home-dir", str(self.base / name),
                        "--shell", "/bin/sh", name], check=True, capture_output=True)
        self.names.append(name)
        (self.base / name).chmod(0o700)  # private homes, as on a hub
        return name

    def home(self, name: str) -> Path:
        return self.base / name

    def run(self, name: str, *command: str, cwd: Path | None = None) -> str:
        """``command`` as user ``name``, in a clean environment with the exchange venv on PATH."""
        env = [f"HOME={self.home(name)}", f"USER={name}", f"LOGNAME={name}", f"PATH={self.path}",
               "LANG=C.UTF-8"]
        done = subprocess.run(["runuser", "-u", name, "--", "env", "-i", *env, *command],
                              cwd=cwd or self.home(name), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{name}: {' '.join(command)}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def remove(self) -> None:
        for name in self.names:
            subprocess.run(["userdel", "--remove", name], capture_output=True)


def write_as(user: str, path: Path, text: str) -> None:
    path.write_text(text)
    shutil.chown(path, user, user)


def need_root(what: str) -> None:
    """Skip, saying why, where Unix users cannot be made; else build the learners' venv."""
    if os.geteuid() != 0:
        pytest.skip(f"{what} makes Unix users: it needs root")
    if not shutil.which("useradd") or not shutil.which("runuser"):
        pytest.skip(f"{what} makes Unix users: useradd and runuser are missing")
    subprocess.run(["make", "-s", "-C", str(ROOT), "exchange-deps", f"EXCHANGE_VENV={EXCHANGE_VENV}"],
                   check=True, timeout=900)


@contextlib.contextmanager
def exchange_course(learner_roles: list[str]):
    """The exchange, an instructor, the learners of ``learner_roles`` and the instructor's
    course folder, all removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="course-hub-", dir="/tmp"))
    base.chmod(0o755)
    users = Users(base)
    try:
        exchange = base / "exchange"
        exchange.mkdir()
        exchange.chmod(0o1777)
        instructor = users.add("i")
        learners = [users.add(role) for role in learner_roles]
        course = users.home(instructor) / "course"
        for part in COURSE_FILES:  # the instructor's copy of the course
            source, dest = ROOT / part, course / part
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if source.is_dir() else shutil.copy)(source, dest)
        with (course / "nbgrader_config.py").open("a") as config:
            config.write(f"c.Exchange.root = {str(exchange)!r}\n")
        for learner in learners:
            (users.home(learner) / ".jupyter").mkdir()
            (users.home(learner) / ".jupyter" / "nbgrader_config.py").write_text(
                "c = get_config()  # noqa: F821\n"
                f"c.Exchange.root = {str(exchange)!r}\n"
                f"c.CourseDirectory.course_id = {COURSE_ID!r}\n")
        for user in [instructor, *learners]:
            subprocess.run(["chown", "-R", f"{user}:{user}", str(users.home(user))], check=True)
        yield {"users": users, "instructor": instructor, "learners": learners, "course": course,
               "exchange": exchange, "base": base}
    finally:
        users.remove()
        shutil.rmtree(base, ignore_errors=True)
