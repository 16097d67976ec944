"""What a learner's kernel may do while it is graded: files, processes, network, limits.

Learner code runs inside an IPython kernel that nbgrader starts. The grading worker never
runs learner code itself; it starts every kernel through this module's launcher (a
kernelspec whose ``argv`` is ``python -m grader.autograde.sandbox kernel CONFIG -- CONNECTION``).
Before the launcher turns into the kernel (``execv``) it applies, where the platform
allows:

* a filesystem of its own, by bubblewrap (``bwrap``, the sandbox Flatpak is built on): the
  system, Python and the course packages read-only; its own notebook folder, HOME, records
  and Jupyter sockets writable; a private ``/tmp`` of bounded size; nothing else: no other
  submission, no output folder, no other job's scratch, no secrets of ``/etc``. Also its
  own PID namespace (no ``/proc`` of the grader; every process it starts dies with it),
  its own network namespace, and no capabilities;
* resource limits (``setrlimit``): CPU seconds, data segment (memory), size of any file
  written, number of processes/threads of the user, no core dumps;
* without bubblewrap, its own network namespace (``unshare(CLONE_NEWNET)`` as root, else
  inside a new user namespace): the kernel sees only a loopback interface that is down.
  nbgrader talks to the kernel over Unix sockets (``KernelManager.transport = "ipc"``), so
  that still works;
* when the grader runs as root: a drop to an unprivileged user (``nobody``), where that
  user can run the course's Python;
* ``PR_SET_NO_NEW_PRIVS`` and ``PR_SET_PDEATHSIG``: no privilege regain through setuid
  programs, and the kernel dies with the worker that started it.

Without bubblewrap the kernel sees the grader's files with the grader's rights: the run
says so loudly, and the grader then checks its own files after every notebook
(:mod:`grader.autograde.host.file_guard`).

The environment is built from scratch (:func:`kernel_env`): PATH, a fresh HOME, the
grading switches, thread counts, and a short list of GPU/driver variables. The launcher
must stay light: it runs before every kernel, so it imports only the standard library.

``python -m grader.autograde.sandbox probe`` applies the same sandbox to a short Python program
that reports what it sees (user, network interfaces, limits, whether torch imports).
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import resource
import signal
import sys
from pathlib import Path

from grader.autograde.sandbox.config import (
    CLONE_NEWNET,
    CLONE_NEWUSER,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    Limits,
    SandboxConfig,
    sandbox_user,
)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> bool:
    return _libc().unshare(flags) == 0


def isolate_network() -> str:
    """Enter a new network namespace; say how (``netns``, ``userns+netns``) or ``none``."""
    if _unshare(CLONE_NEWNET):
        return "netns"
    if os.geteuid() != 0 and _unshare(CLONE_NEWUSER | CLONE_NEWNET):
        return "userns+netns"
    return "none"



#: System folders every kernel reads (a symbolic link, as /bin on Debian, stays a link).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
#: What of /etc a kernel needs; the rest (shadow, ssh keys, ...) stays out of sight.
ETC_FILES = ("passwd", "group", "nsswitch.conf", "hosts", "host.conf", "localtime",
             "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl",
             "ca-certificates", "fonts", "mime.types", "os-release", "debian_version")



def bwrap_args(config: SandboxConfig, writable: list[str], chdir: str) -> list[str]:
    """bubblewrap's command line (up to ``--``) for a kernel that may write ``writable``."""
    # --as-pid-1: the kernel is its PID namespace's init (every process it starts still dies
    # with it), so its CPU time reaches the worker's accounting (with bubblewrap's own
    # init in between it is lost). --new-session: a process group of its own, so that
    # kill(0, ...) (``os.kill(os.getppid(), ...)``: its parent is 0 to it) reaches only the
    # kernel, which as init ignores it, never bubblewrap outside the namespace.
    args = [config.bwrap, "--unshare-all", "--as-pid-1", "--new-session", "--die-with-parent",
            "--cap-drop", "ALL"]
    if not config.isolate_network:
        args.append("--share-net")
    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for name in ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind-try", "/sys", "/sys"]
    for device in sorted(glob.glob("/dev/nvidia*")) + ["/dev/dri"]:  # GPUs, where present
        args += ["--dev-bind-try", device, device]
    args += ["--size", str(config.limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for path in config.readable:
        args += ["--ro-bind", path, path]
    for path in config.hidden:
        if any(Path(path).is_relative_to(r) for r in config.readable):
            args += ["--tmpfs", path]  # inside something readable: covered up
    for path in writable:
        args += ["--bind", path, path]
    # In its own PID namespace the kernel has no parent it can see: ipykernel's parent poller
    # would take that for its parent's death. --die-with-parent does its job.
    return args + ["--remount-ro", "/", "--unsetenv", "JPY_PARENT_PID", "--chdir", chdir, "--"]



# ---------------------------------------------------------------- applying the sandbox


def apply_limits(limits: Limits) -> None:
    """Set soft and hard limits; a limit the system refuses to raise is lowered instead."""
    for which, value in limits.rlimits().items():
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def drop_privileges(ids: tuple[int, int]) -> None:
    uid, gid = ids
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def enter_sandbox(config: SandboxConfig, own: list[str] = ()) -> dict[str, str]:
    """Apply the sandbox to this process; returns what was applied, for reports."""
    applied = {"network": "not isolated (disabled)"}
    if config.isolate_network and config.bwrap:
        applied["network"] = "isolated (bubblewrap)"
    elif config.isolate_network:
        how = isolate_network()
        applied["network"] = f"isolated ({how})" if how != "none" else \
            "not isolated (no permission for namespaces)"
    ids = sandbox_user(config)
    if ids is not None:
        for path in own:
            if os.path.exists(path):
                os.chown(path, *ids)
    apply_limits(config.limits)
    if ids is not None:
        drop_privileges(ids)
        applied["user"] = config.user or ""
    else:
        applied["user"] = f"uid {os.geteuid()} (the grader's own user)"
    libc = _libc()
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return applied



def _kernel_main(argv: list[str]) -> None:
    """``kernel CONFIG -- CONNECTION_FILE``: sandbox this process, then become the kernel."""
    config_file, _, connection_file = argv
    config = SandboxConfig.from_json(Path(config_file).read_text())
    runtime = os.path.dirname(connection_file)
    enter_sandbox(config, own=[connection_file, runtime])
    command = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    if config.bwrap:  # the notebook's folder (the kernel starts there), HOME, records, sockets
        env = os.environ
        writable = [os.getcwd(), runtime, env.get("JUPYTER_RUNTIME_DIR", runtime), env["HOME"],
                    env["COURSE_GRADING_DIR"]]
        command = bwrap_args(config, list(dict.fromkeys(writable)), os.getcwd()) + command
    os.execv(command[0], command)


PROBE_CODE = r"""
import json, os, resource, time
start = time.time()
report = {"uid": os.geteuid(),
          "interfaces": [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]],
          "limits": {n: resource.getrlimit(getattr(resource, n))[0]
                     for n in ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NPROC")}}
report["processes"] = len([p for p in os.listdir('/proc') if p.isdigit()])
try:
    import grader
    probe_file = os.path.join(os.path.dirname(grader.__file__), ".sandbox-probe")
    open(probe_file, "w").close()
    os.remove(probe_file)
    report["grader_writable"] = True
except OSError:
    report["grader_writable"] = False
try:
    import torch, matplotlib, course, grader.checks
    x = torch.randn(64, 64)
    report["torch"] = torch.__version__
    report["cuda"] = bool(torch.cuda.is_available())
    report["torch_ok"] = bool(torch.isfinite(x @ x).all())
except Exception as error:
    report["torch_ok"] = False
    report["error"] = f"{type(error).__name__}: {error}"
report["import_s"] = round(time.time() - start, 2)
print(json.dumps(report))
"""


def _probe_main(argv: list[str]) -> None:
    """``probe CONFIG``: run the probe program inside the sandbox; print its JSON report."""
    config = SandboxConfig.from_json(Path(argv[0]).read_text())
    applied = enter_sandbox(config)
    sys.stdout.write(json.dumps(applied) + "\n")
    sys.stdout.flush()
    command = [sys.executable, "-c", PROBE_CODE]
    if config.bwrap:
        home = os.environ["HOME"]
        command = bwrap_args(config, [home, os.environ["COURSE_GRADING_DIR"]], home) + command
    os.execv(command[0], command)



def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    command, rest = argv[0], argv[1:]
    if command == "kernel":
        _kernel_main(rest)
    elif command == "probe":
        _probe_main(rest)
    else:
        raise SystemExit("usage: python -m grader.autograde.sandbox kernel|probe ...; "
                         f"got {command!r}")

