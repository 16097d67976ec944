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
(:mod:`grader.autograde.guard`).

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
import shutil
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from grader.paths import import_roots

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

#: Environment variables passed through to kernels when the grader has them (GPU drivers).
PASSTHROUGH_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                   "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME",
                   "TZ")

KERNEL_NAME = "course-grader"


@dataclass(frozen=True)
class Limits:
    """Per-process resource limits of a kernel (and anything it starts)."""

    cpu_seconds: int = 900
    memory_mb: int = 4096
    file_mb: int = 1024
    processes: int = 2048
    tmp_mb: int = 512  # size of the kernel's private /tmp (with bubblewrap)

    def rlimits(self) -> dict[int, int]:
        """``resource`` constants and their values (soft = hard)."""
        mib = 1024 * 1024
        return {
            resource.RLIMIT_CPU: self.cpu_seconds,
            # RLIMIT_DATA, not RLIMIT_AS: CUDA reserves huge address ranges it never uses,
            # which RLIMIT_AS would refuse; the data limit counts what is really writable.
            resource.RLIMIT_DATA: self.memory_mb * mib,
            resource.RLIMIT_FSIZE: self.file_mb * mib,
            resource.RLIMIT_NPROC: self.processes,
            resource.RLIMIT_CORE: 0,
        }


@dataclass(frozen=True)
class SandboxConfig:
    """Everything the launcher needs; written as JSON next to the kernelspec."""

    limits: Limits = field(default_factory=Limits)
    user: str | None = "nobody"  # used only when the grader runs as root
    isolate_network: bool = True
    isolate_files: bool = True  # with bubblewrap, where it can run
    bwrap: str = ""  # bubblewrap's path, once resolve() found that it works; "" = not used
    readable: tuple[str, ...] = ()  # what kernels read: Python, the course packages, data
    hidden: tuple[str, ...] = ()  # never visible, even inside ``readable``: OUT, submissions

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SandboxConfig:
        data = json.loads(text)
        return cls(**{**data, "limits": Limits(**data["limits"]),
                      "readable": tuple(data["readable"]), "hidden": tuple(data["hidden"])})


# ---------------------------------------------------------------- namespaces and privileges


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


def sandbox_user(config: SandboxConfig) -> tuple[int, int] | None:
    """(uid, gid) to run kernels as: the configured user when the grader is root, else None."""
    if os.geteuid() != 0 or not config.user:
        return None
    import pwd

    try:
        entry = pwd.getpwnam(config.user)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


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

    import course
    import grader

    paths = [Path(sys.executable), Path(sysconfig.get_paths()["stdlib"]),
             Path(sysconfig.get_paths()["purelib"]), Path(course.__file__).parent,
             Path(grader.__file__).parent]
    return paths


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


# ---------------------------------------------------------------- the filesystem (bubblewrap)

#: System folders every kernel reads (a symbolic link, as /bin on Debian, stays a link).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
#: What of /etc a kernel needs; the rest (shadow, ssh keys, ...) stays out of sight.
ETC_FILES = ("passwd", "group", "nsswitch.conf", "hosts", "host.conf", "localtime",
             "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl",
             "ca-certificates", "fonts", "mime.types", "os-release", "debian_version")


def readable_paths() -> list[str]:
    """What kernels must read besides the system: Python with its packages, the course
    helpers and grader, the course data (outermost folders only)."""
    import site
    import sysconfig

    import course
    import grader

    course_dir = Path(course.__file__).resolve().parent
    # Not sys.path: it holds the folder the grader was started from (the whole checkout).
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values(),
             *site.getsitepackages(), course_dir, Path(grader.__file__).resolve().parent,
             course_dir.parent / "data", os.environ.get("COURSE_DATA_DIR", "")]
    paths = sorted({str(Path(p).resolve()) for p in found if p and Path(p).is_dir()})
    system = [str(Path(d).resolve()) for d in SYSTEM_DIRS]
    outermost = [p for p in paths if not any(p != q and Path(p).is_relative_to(q) for q in paths)]
    return [p for p in outermost if not any(Path(p).is_relative_to(d) for d in system)]


def bwrap_args(config: SandboxConfig, writable: list[str], chdir: str) -> list[str]:
    """bubblewrap's command line (up to ``--``) for a kernel that may write ``writable``."""
    # --as-pid-1: the kernel is its PID namespace's init (every process it starts still dies
    # with it), so its CPU time reaches the worker's accounting (with bubblewrap's own
    # init in between it is lost).
    args = [config.bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--cap-drop", "ALL"]
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


# ---------------------------------------------------------------- kernels


def write_kernelspec(folder: Path, config: SandboxConfig) -> Path:
    """A Jupyter data dir with the sandboxed kernelspec; put it on ``JUPYTER_PATH``."""
    spec_dir = folder / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    config_file = spec_dir / "sandbox.json"
    config_file.write_text(config.to_json())
    spec = {
        "argv": [sys.executable, "-m", "grader.autograde.sandbox", "kernel", str(config_file), "--",
                 "{connection_file}"],
        "display_name": "Python 3 (course grader sandbox)",
        "language": "python",
        # With bubblewrap, SIGINT to the kernel's process group would also stop bubblewrap
        # (and so the kernel): ask the kernel to interrupt itself instead.
        "interrupt_mode": "message" if config.bwrap else "signal",
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return folder


def kernel_env(home: Path, grading_dir: Path, threads: int, extra: dict[str, str] | None = None
               ) -> dict[str, str]:
    """The whole environment of a kernel: nothing is inherited but the listed GPU variables."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "COURSE_GRADING_DIR": str(grading_dir),
        "COURSE_QUICK": "1",
        "MPLCONFIGDIR": str(home / ".config" / "matplotlib"),
        "IPYTHONDIR": str(home / ".ipython"),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",  # the grader's bytecode is checked, not rewritten
        "PYTHONPATH": os.pathsep.join(import_roots()),  # the grader and course of this run
    }
    env.update({k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ})
    env.update(extra or {})
    return env


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


def probe(config: SandboxConfig, env: dict[str, str], folder: Path, timeout: float = 300) -> dict:
    """What a sandboxed kernel sees: applied settings, interfaces, limits, torch import.

    Raises RuntimeError when torch cannot be imported under the limits, so a run never
    starts with a sandbox in which every notebook would fail.
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
        raise RuntimeError("The grading sandbox could not start a Python process:\n"
                           f"{result.stdout[-2000:]}{result.stderr[-2000:]}") from None
    if not report.get("torch_ok"):
        raise RuntimeError(
            f"torch does not work inside the grading sandbox ({report.get('error')}). "
            "Raise --memory-mb or --cpu-seconds, or pass --no-sandbox-user if the "
            "course files are not readable by the sandbox user.")
    return report


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


if __name__ == "__main__":
    main()
