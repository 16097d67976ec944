"""``make image-check``: build the grading image with the Dockerfile and grade planted
submissions in it, which must give the grades.csv the same command gives on this machine.

Without any image registry: the base is a Debian bookworm root filesystem made by
``debootstrap`` and imported with ``podman import`` (``--base IMAGE`` takes one from a
registry instead). pip inside the build uses this machine's pip settings (``pip config
list``), with the local folders they name (wheels, index mirrors, CA bundle) mounted
read-only, so a machine that installs from a local mirror builds the image from it too.
Needs root and podman with runc (``make image-deps``). Prints the time of every step.
"""

from __future__ import annotations

import argparse
import configparser
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.submissions import planted  # noqa: E402  (the checkout's planted submissions)

LOCAL_BASE = "localhost/course-debian:bookworm"
IMAGE = "localhost/transformer-course/grader:check"
PIP_DIR = "/run/course-pip"  # where the build sees the pip settings
# podman's defaults fail on some kernels (crun's setrlimit, hybrid cgroups): runc, fixed limits.
RUNTIME = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
# What bubblewrap needs inside the container (docs/grading.md, "A grading image").
SANDBOX = ["--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
           "--security-opt", "unmask=ALL"]
STUDENTS = ["correct", "late", "wrong-qkv", "syntax-error", "os-exit", "test-deleted",
            "cheat-allclose", "invalid-json", "missing-notebook"]
GRADING = ["--jobs", "2", "--timeout", "20", "--memory-mb", "2500", "--quiet",
           "--deadline", planted.DEADLINE]
PIP_PATH_KEYS = {"find-links", "index-url", "extra-index-url", "constraint", "cert", "client-cert"}


def step(name: str, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    started = time.monotonic()
    print(f"== {name}: {' '.join(command)[:200]}", flush=True)
    done = subprocess.run(command, check=True, **kwargs)
    print(f"== {name}: {time.monotonic() - started:.0f} s", flush=True)
    return done


def image_exists(name: str) -> bool:
    return subprocess.run(["podman", "image", "exists", name]).returncode == 0


def local_base(work: Path, mirror: str) -> str:
    """The debootstrap root filesystem as an image (made once, then reused)."""
    if not image_exists(LOCAL_BASE):
        rootfs = work / "rootfs"
        if not (rootfs / "usr" / "bin" / "python3").exists():
            shutil.rmtree(rootfs, ignore_errors=True)
            step("debootstrap", ["debootstrap", "--variant=minbase",
                                 "--include=python3,python3-venv,ca-certificates", "bookworm",
                                 str(rootfs), mirror])
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        step("podman import", ["podman", "import", "-", LOCAL_BASE], stdin=tar.stdout)
        tar.wait()
    return LOCAL_BASE


def pip_settings(work: Path) -> tuple[Path, set[str]]:
    """This machine's pip settings as one file, and the local paths they name."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], check=True,
                            capture_output=True, text=True).stdout
    settings: dict[str, str] = {}
    for line in listed.splitlines():  # "global.find-links='/opt/wheels'", ":env:.cert='...'"
        key, _, value = line.partition("=")
        settings[key.rpartition(".")[2]] = value.strip("'\"")
    mounts = set()
    for key, value in settings.items():
        for part in value.split() if key in PIP_PATH_KEYS else []:
            path = Path(part.removeprefix("file://"))
            if path.is_absolute() and path.exists():  # a file, or the folder that holds an index
                mounts.add(str(path if path.is_file() else Path(*path.parts[:3])))
    config = configparser.ConfigParser()
    config["global"] = {k: v for k, v in settings.items() if k != "disable-pip-version-check"}
    path = work / "pip" / "pip.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as file:
        config.write(file)
    return path, mounts


def build(base: str, work: Path) -> None:
    pip_conf, mounts = pip_settings(work)
    volumes = [f"-v{pip_conf.parent}:{PIP_DIR}:ro"] + [f"-v{m}:{m}:ro" for m in sorted(mounts)]
    local = ["--build-arg", f"PIP_CONFIG_FILE={PIP_DIR}/pip.conf"]
    if mounts:  # a local mirror: torch from it too, not from TORCH_INDEX's server
        local += ["--build-arg", f"TORCH_INDEX=file://{PIP_DIR}/no-index"]
    step("podman build", ["podman", "build", *RUNTIME, "--build-arg", f"BASE_IMAGE={base}", *local,
                          *volumes, "-t", IMAGE, str(ROOT)])


def grade(work: Path) -> tuple[str, str]:
    """The planted submissions graded on this machine and in the image: both grades.csv."""
    submitted = work / "submitted"
    shutil.rmtree(submitted, ignore_errors=True)
    planted.build(submitted, STUDENTS)
    host, inside = work / "out-host", work / "out-image"
    for out in (host, inside):
        shutil.rmtree(out, ignore_errors=True)
    inside.mkdir(parents=True)
    inside.chmod(0o777)  # the image's grading user (1000) writes it
    step("grade on the host", [sys.executable, "-m", "grader", "autograde", str(submitted),
                               "--out", str(host), *GRADING], cwd=ROOT)
    step("grade in the image", ["podman", "run", "--rm", *RUNTIME, *SANDBOX,
                                f"-v{submitted}:/grading/submitted:ro", f"-v{inside}:/grading/out",
                                IMAGE, "autograde", "/grading/submitted", "--out", "/grading/out",
                                "--require-sandbox", *GRADING])
    return (host / "grades.csv").read_text(), (inside / "grades.csv").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="base image from a registry (default: debootstrap's)")
    parser.add_argument("--work", default="/var/tmp/course-image-check",
                        help="scratch folder: the root filesystem, pip settings, grading outputs")
    parser.add_argument("--mirror", default="http://deb.debian.org/debian")
    args = parser.parse_args()
    missing = [c for c in ("podman", "runc") + (() if args.base else ("debootstrap",))
               if not shutil.which(c)]
    if missing or os.geteuid() != 0:
        print(f"image-check needs root and {', '.join(missing) or 'podman'}: run it as root after "
              "make image-deps (Debian/Ubuntu).", file=sys.stderr)
        return 2
    started = time.monotonic()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    build(args.base or local_base(work, args.mirror), work)
    torch = step("torch in the image", ["podman", "run", "--rm", *RUNTIME, "--entrypoint", "python",
                                        IMAGE, "-c", "import torch; print(torch.__version__)"],
                 capture_output=True, text=True).stdout.strip()
    import torch as host_torch

    print(f"torch in the image: {torch}, on this machine: {host_torch.__version__}")
    if torch != host_torch.__version__:
        print("image-check FAILED: the image's torch is not this machine's.", file=sys.stderr)
        return 1
    host, inside = grade(work)
    print(inside, end="")
    total = f"{time.monotonic() - started:.0f} s"
    if host != inside:
        print(f"image-check FAILED ({total}): the image's grades.csv differs from the host's:\n"
              f"{host}", file=sys.stderr)
        return 1
    print(f"image-check passed ({total}): the image grades {len(STUDENTS)} planted submissions "
          "exactly as this machine does.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
