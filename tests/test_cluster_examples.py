"""The cluster examples and the grading image, checked without a cluster or a Docker engine:
the Kubernetes Indexed Job and the SLURM array grade every shard once, their commands are
ones the command line accepts, and the Dockerfile agrees with the YAML and the docs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.__main__ import build_parser
from grader.autograde.host.submissions import parse_shard
from tests.settings import ROOT

K8S = ROOT / "docs" / "k8s-autograde-job.yaml"
SLURM = ROOT / "docs" / "slurm-autograde.sh"
DOCKERFILE = ROOT / "Dockerfile"
RECORDER = f"#!{sys.executable}\nimport json, os, sys\n" \
           "with open(os.environ['CALLS'], 'a') as log:\n" \
           "    log.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + '\\n')\n"


@pytest.fixture(scope="module")
def jobs() -> dict[str, dict]:
    documents = list(yaml.safe_load_all(K8S.read_text()))
    assert [d["kind"] for d in documents] == ["Job", "Job"]
    return {d["metadata"]["labels"]["step"]: d for d in documents}


def container(job: dict) -> dict:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def stubs(folder: Path, *names: str) -> Path:
    """Commands that only record how they were called (into $CALLS)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text(RECORDER)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def parsed(argv: list[str]):
    """``argv`` as the command line parses it (argparse exits on anything it refuses)."""
    return build_parser().parse_args(argv)


def run_shell(command: str, tmp_path: Path, env: dict[str, str], shell: str = "/bin/sh") -> list[list[str]]:
    log = tmp_path / "calls.jsonl"
    log.unlink(missing_ok=True)
    bin_dir = stubs(tmp_path / "bin", "course-grader", "python", "sbatch")
    environment = {**os.environ, **env, "CALLS": str(log), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run([shell, "-c", command], env=environment, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return calls(log)


# ---------------------------------------------------------------- Kubernetes


def shard_command(jobs: dict[str, dict]) -> tuple[list[str], str]:
    spec = container(jobs["shards"])
    assert spec["command"] == ["/bin/sh", "-c"]
    (script,) = spec["args"]
    return spec["command"], script


def pods(jobs: dict[str, dict], tmp_path: Path) -> list:
    """What each pod 0..N-1 of the shard job runs, as the command line parses it."""
    _, script = shard_command(jobs)
    runs = []
    for index in range(jobs["shards"]["spec"]["completions"]):
        (call,) = run_shell(script, tmp_path, {"JOB_COMPLETION_INDEX": str(index),
                                                "DEADLINE": "2026-12-01T23:59:00+01:00"})
        assert call[0] == "course-grader"
        runs.append(parsed(call[1:]))
    return runs


def test_every_index_of_the_indexed_job_grades_its_own_shard(jobs, tmp_path):
    """Do the pods 0..N-1 run ``course-grader autograde --shard K/N`` for K = 1..N, each once,
    into distinct outputs, with commands the parser accepts?"""
    spec = jobs["shards"]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] <= spec["completions"]
    total = spec["completions"]
    runs = pods(jobs, tmp_path)
    assert all(a.command == "autograde" and a.deadline == ["2026-12-01T23:59:00+01:00"]
               and a.require_sandbox for a in runs)
    assert [parse_shard(a.shard) for a in runs] == [(k, total) for k in range(1, total + 1)]
    assert len({a.out for a in runs}) == total and len({a.submissions for a in runs}) == 1


def test_a_planted_off_by_one_is_caught(jobs, tmp_path):
    """Would pods counting shards from 0 be caught (testing the test)?"""
    _, script = shard_command(jobs)
    broken = script.replace("--shard $((JOB_COMPLETION_INDEX + 1))", "--shard $((JOB_COMPLETION_INDEX))")
    assert broken != script
    (call,) = run_shell(broken, tmp_path, {"JOB_COMPLETION_INDEX": "0", "DEADLINE": "2026-12-01"})
    with pytest.raises(Exception, match="shard"):
        parse_shard(parsed(call[1:]).shard)


def test_the_merge_job_merges_every_shard_output(jobs, tmp_path):
    """Does the merge job's command name every shard's output, as the parser reads it?"""
    outs = {a.out for a in pods(jobs, tmp_path)}
    grading = tmp_path / "grading"
    for out in outs:
        (grading / Path(out).relative_to("/grading")).mkdir(parents=True)
    spec = container(jobs["merge"])
    assert spec["command"] == ["/bin/sh", "-c"]
    (merge,) = spec["args"]
    (call,) = run_shell(merge.replace("/grading", str(grading)), tmp_path, {})
    args = parsed(call[1:])
    assert args.command == "merge" and args.out == str(grading / "graded")
    assert {p.replace(str(grading), "/grading") for p in args.outputs} == outs


def test_the_pods_can_run_the_sandbox(jobs):
    """Does the shard pod allow bubblewrap (own user namespace, seccomp, /proc) while staying
    non-root, unprivileged and read-only, with a writable /tmp?"""
    pod = jobs["shards"]["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] in {"Unconfined", "Localhost"}
    security = container(jobs["shards"])["securityContext"]
    assert security["procMount"] == "Unmasked" and security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in container(jobs["shards"])["volumeMounts"]}
    assert {"/grading", "/tmp"} <= mounts


# ---------------------------------------------------------------- SLURM


def slurm_env(tmp_path: Path, task: int, total: int, task_max: int | None = None) -> dict[str, str]:
    course = tmp_path / "course"
    (course / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    (course / ".venv" / "bin" / "activate").write_text("")  # the stubs stay first on PATH
    return {"COURSE": str(course), "GRADING": str(tmp_path / "grading"),
            "SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_COUNT": str(total),
            "SLURM_ARRAY_TASK_MAX": str(task_max or total), "SLURM_ARRAY_JOB_ID": "4242",
            "SLURM_CPUS_PER_TASK": "4", "DEADLINE": "2026-12-01T23:59:00+01:00"}


def slurm_array() -> tuple[int, int]:
    """The script's ``#SBATCH --array=FIRST-LAST``, checked against its default SHARDS."""
    text = SLURM.read_text()
    first, last = map(int, re.search(r"^#SBATCH --array=(\d+)-(\d+)", text, re.M).groups())
    assert first == 1 and f"SHARDS=${{SHARDS:-{last}}}" in text
    return first, last


def slurm_task(tmp_path: Path, env: dict[str, str]) -> tuple[object, list[list[str]]]:
    """The autograde command one array task runs (parsed), and the jobs it queues."""
    made = run_shell(f"bash {shlex.quote(str(SLURM))}", tmp_path, env, shell="/bin/bash")
    grading = [c for c in made if c[0] == "python"]
    assert len(grading) == 1 and grading[0][1:3] == ["-m", "grader"]
    return parsed(grading[0][3:]), [c for c in made if c[0] == "sbatch"]


def test_every_task_of_the_slurm_array_grades_its_own_shard(tmp_path):
    """Do the array tasks 1..N run ``python -m grader autograde --shard K/N --require-sandbox``
    (K = 1..N, each once), the highest one queueing the merge, all accepted by the parser?"""
    first, last = slurm_array()
    shards = []
    for task in range(first, last + 1):
        args, queued = slurm_task(tmp_path, slurm_env(tmp_path, task, last))
        assert args.command == "autograde" and args.jobs == 4 and args.require_sandbox
        shards.append(parse_shard(args.shard))
        assert len(queued) == (task == last)
        if queued:
            merge_job = queued[0]
    assert sorted(shards) == [(k, last) for k in range(1, last + 1)]
    wrap = merge_job[merge_job.index("--wrap") + 1]
    assert "--dependency=afterany:4242" in merge_job and wrap.endswith("slurm-autograde.sh merge")


def test_a_task_rerun_on_its_own_keeps_its_shard(tmp_path):
    """Does ``sbatch --array=3`` (an array of one task, numbered 3) grade shard 3/N into
    out-3, the same folder, and queue the merge again?"""
    _, last = slurm_array()
    args, queued = slurm_task(tmp_path, slurm_env(tmp_path, 3, total=1, task_max=3))
    assert parse_shard(args.shard) == (3, last) and args.out.endswith("/out-3")
    assert len(queued) == 1 and "--dependency=afterany:4242" in queued[0]


def test_a_task_outside_the_shards_is_refused(tmp_path):
    """Is an array task numbered above SHARDS refused before grading anything?"""
    _, last = slurm_array()
    env = slurm_env(tmp_path, last + 1, last + 1)
    log = tmp_path / "calls.jsonl"
    bin_dir = stubs(tmp_path / "bin", "python", "sbatch")
    done = subprocess.run(["bash", str(SLURM)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env, "CALLS": str(log),
                               "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert done.returncode == 2 and "outside the shards" in done.stderr and not calls(log)


def test_the_slurm_merge_step_merges_every_shard(tmp_path):
    """Does ``slurm-autograde.sh merge`` run ``python -m grader merge`` over out-1..out-N?"""
    _, last = slurm_array()
    env = slurm_env(tmp_path, last, last)
    (call,) = run_shell(f"bash {shlex.quote(str(SLURM))} merge", tmp_path, env, shell="/bin/bash")
    args = parsed(call[3:])
    assert args.command == "merge"
    assert args.outputs == [str(tmp_path / "grading" / f"out-{k}") for k in range(1, last + 1)]
    assert args.out == str(tmp_path / "grading" / "graded")


# ---------------------------------------------------------------- --require-sandbox


def test_require_sandbox_refuses_to_grade_without_bubblewrap(monkeypatch):
    """Does ``--require-sandbox`` refuse where bubblewrap is missing or turned off, and pass
    where it runs?"""
    from grader.autograde.host import sandbox
    from grader.autograde.host.options import Options
    from grader.errors import SandboxError

    assert parsed(["autograde", "s", "--out", "o", "--require-sandbox"]).require_sandbox
    with pytest.raises(SandboxError, match="--require-sandbox: refusing.*NOT isolated.*no-file-sandbox"):
        Options(require_sandbox=True, isolate_files=False).sandbox()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="bubblewrap is not installed"):
        Options(require_sandbox=True).sandbox()
    config, notes = Options(require_sandbox=False).sandbox()  # without it: a warning only
    assert not config.bwrap and "NOT isolated" in notes["files"]
    monkeypatch.undo()
    if shutil.which("bwrap") and "isolated by" in Options().sandbox()[1]["files"]:
        assert Options(require_sandbox=True).sandbox()[0].bwrap


# ---------------------------------------------------------------- the image


def dockerfile() -> dict[str, list[str]]:
    """Instructions of the Dockerfile (continuation lines joined), by keyword."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.setdefault(keyword.upper(), []).append(rest.strip())
    return found


def image_env(instructions: dict[str, list[str]]) -> dict[str, str]:
    env = {}
    for line in instructions["ENV"]:
        env.update(dict(part.split("=", 1) for part in shlex.split(line)))
    return env


def test_the_image_agrees_with_the_yaml_and_the_docs(jobs):
    """Non-root user of the pods, course-grader as entry point and on PATH, the course where
    COURSE_ROOT says, installed from the pinned requirements, bubblewrap in, the root
    filesystem not written to, and the image named in the YAML built from it in the docs."""
    steps = dockerfile()
    env = image_env(steps)
    user = steps["USER"][-1].split(":")[0]
    for job in jobs.values():
        assert str(job["spec"]["template"]["spec"]["securityContext"]["runAsUser"]) == user
        assert container(job)["image"] == container(jobs["shards"])["image"]
    entry = json.loads(steps["ENTRYPOINT"][-1])
    assert entry[-1] == "course-grader"
    venv_bin = env["VIRTUAL_ENV"] + "/bin"
    assert env["PATH"].split(":")[0] == venv_bin
    from importlib.metadata import entry_points

    from grader.__main__ import main

    (script,) = entry_points(group="console_scripts", name="course-grader")  # as installed
    assert script.load() is main
    copies = [c.split() for c in steps["COPY"]]
    assert [".", env["COURSE_ROOT"]] in copies
    runs = " ".join(steps["RUN"])
    assert f"pip install --no-deps -e {env['COURSE_ROOT']}" in runs
    assert f"-r {env['COURSE_ROOT']}/requirements.txt" in runs and "bubblewrap" in runs
    assert "chmod -R a+rX,go-w" in runs
    for writable in ("HOME", "TMPDIR", "MPLCONFIGDIR"):
        assert env[writable].startswith("/tmp"), writable  # the YAML's emptyDir; root is read-only
    image = container(jobs["shards"])["image"]
    assert f"docker build -t {image} ." in K8S.read_text()
    assert f"docker build -t {image} ." in DOCKERFILE.read_text()
    grading = (ROOT / "docs" / "grading.md").read_text()
    assert "Dockerfile" in grading and env["COURSE_ROOT"] in grading and "bubblewrap" in grading


def test_the_image_context_keeps_what_grading_needs():
    """Does .dockerignore leave out the virtual environment and git, and keep the sources,
    helpers, grader, data and configuration?"""
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert ".venv" in ignored and ".git" in ignored
    for needed in ("solutions", "grader", "course", "data", "nbgrader_config.py", "pyproject.toml",
                   "requirements.txt"):
        assert needed not in ignored and (ROOT / needed).exists(), needed


def test_the_base_image_is_a_build_argument_defaulting_to_the_public_one():
    """Is the base image ``BASE_IMAGE`` (the public python image unless given), the one
    ``make image-check`` replaces with its debootstrap root filesystem?"""
    steps = dockerfile()
    (base_arg,) = [a for a in steps["ARG"] if a.startswith("BASE_IMAGE=")]
    assert base_arg == "BASE_IMAGE=python:3.11-slim-bookworm"
    assert steps["FROM"] == ["${BASE_IMAGE}"]
    assert DOCKERFILE.read_text().index("ARG BASE_IMAGE") < DOCKERFILE.read_text().index("FROM")


def test_the_image_check_builds_on_a_debootstrap_base(tmp_path, monkeypatch):
    """Does ``make image-check`` make its base with debootstrap when it has none, and build the
    Dockerfile on that base (``BASE_IMAGE``)? Its commands recorded, none run."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("image_check", ROOT / "scripts" / "image_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    commands = []
    monkeypatch.setattr(check, "step", lambda name, command, **kw: commands.append(command))
    monkeypatch.setattr(check, "image_exists", lambda name: False)
    monkeypatch.setattr(check, "pip_settings", lambda work: (work / "pip" / "pip.conf", set()))
    with monkeypatch.context() as tar:  # the tar of the root filesystem into podman import
        tar.setattr(check.subprocess, "Popen", lambda *a, **kw: type("Tar", (), {
            "stdout": None, "wait": lambda self: 0})())
        base = check.local_base(tmp_path, "http://deb.example/debian")
    check.build(base, tmp_path)
    debootstrap, imported, built = commands
    assert debootstrap[0] == "debootstrap" and debootstrap[-1] == "http://deb.example/debian"
    assert imported[:2] == ["podman", "import"] and imported[-1] == base
    assert built[:2] == ["podman", "build"] and f"BASE_IMAGE={base}" in built
    assert built[built.index(f"BASE_IMAGE={base}") - 1] == "--build-arg" and built[-1] == str(ROOT)
