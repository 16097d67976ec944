"""The kernels' sandbox as this platform allows it, decided on the host before a run.

Which user kernels run as (:func:`resolve_user`), whether bubblewrap runs here
(:func:`resolve_files`), what a kernel must read (:func:`readable_paths`), and a trial of
the whole sandbox before the first notebook (:func:`probe`): a run never starts with a
sandbox in which every notebook would fail. The launcher that applies it is
:mod:`grader.autograde.sandbox.launcher`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from grader.autograde.sandbox.config import SandboxConfig, sandbox_user
from grader.autograde.sandbox.launcher import SYSTEM_DIRS
from grader.errors import SandboxError
from grader.paths import PACKAGE_DIR, course_package_dir, data_dirs


def _readable_by(path: Path, uid: int, gid: int) -> bool:
    """Whether ``uid``/``gid`` (without supplementary groups) can reach and read ``path``."""
    path = path.resolve()
    for part in [*reversed(path.parents), path]:
        info = part.stat()
        need = 0o5 if part.is_dir() else 0o4
        if info.st_uid == uid:
            bits = (info.st_mode >> 6) & 0o7
        elif info.st_gid == gid:
            bits = (info.st_mode >> 3) & 0o7
        else:
            bits = info.st_mode & 0o7
        if bits & need != need:
            return False
    return True


def required_paths() -> list[Path]:
    """What a kernel must read: the interpreter, its libraries, torch, the course packages."""
    import sysconfig

    return [Path(sys.executable), Path(sysconfig.get_paths()["stdlib"]),
            Path(sysconfig.get_paths()["purelib"]), course_package_dir(), PACKAGE_DIR]


def resolve_user(config: SandboxConfig) -> tuple[SandboxConfig, str]:
    """Keep the sandbox user only if it can run the course's Python; say why not otherwise."""
    ids = sandbox_user(config)
    if ids is None:
        reason = ("the grader is not root" if os.geteuid() != 0 else
                  f"no user {config.user!r}" if config.user else "disabled")
        return replace(config, user=None), f"kernels run as the grader's user ({reason})"
    blocked = [str(p.resolve()) for p in required_paths() if not _readable_by(p, *ids)]
    if blocked:
        return replace(config, user=None), (
            f"kernels run as the grader's user: {config.user} cannot read {blocked[0]} "
            "(install Python and the course outside a private home directory)")
    return config, f"kernels run as {config.user}"


def readable_paths() -> list[str]:
    """What kernels must read besides the system: Python with its packages, the course
    helpers and grader, the course data (outermost folders only)."""
    import site
    import sysconfig

    # Not sys.path: it holds the folder the grader was started from (the whole checkout).
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values(),
             *site.getsitepackages(), course_package_dir(), PACKAGE_DIR, *data_dirs()]
    paths = sorted({str(Path(p).resolve()) for p in found if p and Path(p).is_dir()})
    system = [str(Path(d).resolve()) for d in SYSTEM_DIRS]
    outermost = [p for p in paths if not any(p != q and Path(p).is_relative_to(q) for q in paths)]
    return [p for p in outermost if not any(Path(p).is_relative_to(d) for d in system)]


def resolve_files(config: SandboxConfig) -> tuple[SandboxConfig, str]:
    """Keep filesystem isolation only if bubblewrap runs here; say how kernels see files."""
    if not config.isolate_files:
        return replace(config, bwrap=""), "NOT isolated (--no-file-sandbox)"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return replace(config, bwrap=""), (
            "NOT isolated: bubblewrap is not installed (apt-get install bubblewrap; see "
            "docs/grading.md); learner code can read and write what the grader can")
    trial = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                            "true"], capture_output=True, text=True)
    if trial.returncode != 0:
        return replace(config, bwrap=""), (
            f"NOT isolated: bubblewrap cannot run here ({trial.stderr.strip()[:160]}; user "
            "namespaces may be disabled, see docs/grading.md)")
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    return replace(config, bwrap=bwrap), (
        f"isolated by {version or 'bubblewrap'} (read-only system, own folder only, private "
        f"/tmp of {config.limits.tmp_mb} MB, own PID namespace)")


def require_isolation(config: SandboxConfig, files: str) -> None:
    """Refuse to grade (``--require-sandbox``) unless bubblewrap isolates every kernel."""
    if not config.bwrap:
        raise SandboxError(
            f"--require-sandbox: refusing to grade, the kernels' files would be {files}. Install "
            "bubblewrap and allow unprivileged user namespaces on this machine (docs/grading.md, "
            "\"A grading image\"), or grade elsewhere; nothing was graded.")


def probe(config: SandboxConfig, env: dict[str, str], folder: Path, timeout: float = 300) -> dict:
    """What a sandboxed kernel sees: applied settings, interfaces, limits, torch import.

    Raises :class:`SandboxError` when torch cannot be imported under the limits, so a run
    never starts with a sandbox in which every notebook would fail.
    """
    config_file = folder / "probe-sandbox.json"
    config_file.write_text(config.to_json())
    for sub in ("tmp", ".config/matplotlib"):
        Path(env["HOME"], sub).mkdir(parents=True, exist_ok=True)
    Path(env["COURSE_GRADING_DIR"]).mkdir(parents=True, exist_ok=True)
    ids = sandbox_user(config)
    if ids is not None:
        for path in [Path(env["HOME"]), *Path(env["HOME"]).rglob("*")]:
            os.chown(path, *ids)
    result = subprocess.run([sys.executable, "-m", "grader.autograde.sandbox", "probe", str(config_file)],
                            env=env, capture_output=True, text=True, timeout=timeout,
                            cwd=env["HOME"])
    lines = result.stdout.strip().splitlines()
    try:
        report = {**json.loads(lines[0]), **json.loads(lines[1])}
    except (IndexError, json.JSONDecodeError):
        hint = ("; bubblewrap's namespace has no root privileges over others' files: put --out "
                "where the grading user can reach it without them (not in another user's "
                "private home)" if "Permission denied" in result.stderr else "")
        raise SandboxError("The grading sandbox could not start a Python process (try "
                           f"--no-file-sandbox to tell bubblewrap's part from the rest{hint}):\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}") from None
    if not report.get("torch_ok"):
        raise SandboxError(
            f"torch does not work inside the grading sandbox ({report.get('error')}). "
            "Raise --memory-mb or --notebook-timeout (the CPU limit), or pass "
            "--no-sandbox-user if the course files are not readable by the sandbox user.")
    return report
