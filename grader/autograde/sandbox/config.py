"""The sandbox as it crosses from the grader to the launcher: its settings and the kernel's world.

The host decides the sandbox (:mod:`grader.autograde.host.sandbox`), writes it as JSON next
to the kernelspec (:func:`write_kernelspec`), and the launcher
(:mod:`grader.autograde.sandbox.launcher`) reads it before it turns into the kernel. The
environment of a kernel is built from scratch (:func:`kernel_env`). Standard library only:
the launcher runs before every kernel.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from dataclasses import asdict, dataclass, field
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
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict) -> SandboxConfig:
        return cls(**{**data, "limits": Limits(**data["limits"]),
                      "readable": tuple(data["readable"]), "hidden": tuple(data["hidden"])})



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
