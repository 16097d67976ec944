"""docs/slurm-autograde.sh on a real one-node SLURM cluster (Debian's slurm-wlm and munge,
``make slurm-deps``): a planted class graded as an array of shards and merged gives the
grades.csv of one machine (the planted batch of conftest.py); a task cancelled midway and
rerun on its own (``sbatch --array=K``) resumes, grades nothing twice, and the merge then
runs.

The cluster is started by hand (no systemd): munged, ``slurmctld -D``, ``slurmd -D``, on free
ports, with its own configuration and state in a temporary folder, and stopped whatever
the outcome. Needs root (slurmd starts jobs as their user).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.settings import ROOT
from tests.submissions import planted

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "docs" / "slurm-autograde.sh"
SHARDS = 2
# Sorted round robin: shard 1 = correct, syntax-error; shard 2 = late, wrong-qkv. Shard 1 is
# the one cancelled midway, after its first result.
CLASS = ["correct", "late", "syntax-error", "wrong-qkv"]
CANCELLED = 1
# The nodes' resources are this machine's: the script's own header asks for a large node.
SMALL_NODE = ["--cpus-per-task=1", "--mem=2G"]
MUNGE_RUN = Path("/run/munge")
CONFIG = """\
ClusterName=course
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what: str, timeout: float = 60, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def munge_works() -> bool:
    encoded = subprocess.run(["munge", "-n"], capture_output=True)
    return encoded.returncode == 0 and subprocess.run(
        ["unmunge"], input=encoded.stdout, capture_output=True).returncode == 0


def start_munged() -> int | None:
    """munged as the munge user (its run folder made first); None when one already runs."""
    if munge_works():
        return None
    MUNGE_RUN.mkdir(parents=True, exist_ok=True)
    shutil.chown(MUNGE_RUN, "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", "munged"], check=True, timeout=30)
    wait_for(munge_works, "munged")
    return int((MUNGE_RUN / "munged.pid").read_text())


class Cluster:
    """A one-node cluster of this machine; its commands run with its SLURM_CONF."""

    def __init__(self, folder: Path):
        self.folder = folder
        for sub in ("state", "spool"):
            (folder / sub).mkdir(parents=True)
        node = subprocess.run(["slurmd", "-C"], check=True, capture_output=True,
                              text=True).stdout.splitlines()[0]
        host = re.match(r"NodeName=(\S+)", node)[1]
        self.conf = folder / "slurm.conf"
        self.conf.write_text(CONFIG.format(host=host, node=node, dir=folder, ctld_port=free_port(),
                                           d_port=free_port()))
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: list[subprocess.Popen] = []
        self.munged: int | None = None

    def start(self) -> None:
        self.munged = start_munged()
        for daemon in ("slurmctld", "slurmd"):
            log = (self.folder / f"{daemon}.out").open("w")
            self.daemons.append(subprocess.Popen([daemon, "-D", "-f", str(self.conf)], env=self.env,
                                                 stdout=log, stderr=subprocess.STDOUT))
        wait_for(lambda: "idle" in self.run("sinfo", "-h", "-o", "%t", check=False), "an idle node")

    def stop(self) -> None:
        subprocess.run(["scancel", "--full", "-u", "root"], env=self.env, capture_output=True,
                       timeout=30)
        for daemon in reversed(self.daemons):
            daemon.terminate()
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if self.munged:
            os.kill(self.munged, 15)

    def run(self, *command: str, check: bool = True, cwd: Path | None = None) -> str:
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60,
                              cwd=cwd)
        if check and done.returncode:
            raise AssertionError(f"{' '.join(command)}: {done.stderr}")
        return done.stdout

    def sbatch(self, *options: str, env: dict[str, str], cwd: Path) -> str:
        """Submit the docs' script as the docs say, on a node of this machine's size."""
        done = subprocess.run(["sbatch", "--parsable", *SMALL_NODE, *options, str(SCRIPT)],
                              env={**self.env, **env}, capture_output=True, text=True, cwd=cwd,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def idle(self) -> bool:
        return not self.run("squeue", "-h", check=False).strip()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("a SLURM cluster needs root (slurmd starts jobs as their user)")
    missing = [c for c in ("slurmctld", "slurmd", "sbatch", "munged", "runuser") if not shutil.which(c)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: make slurm-deps (slurm-wlm, munge)")
    if shutil.which("bwrap") is None:
        pytest.skip("the script grades with --require-sandbox: make sandbox-deps (bubblewrap)")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def graded(log: Path) -> tuple[int, int]:
    """(graded, skipped) from the summary line an autograde run printed into its log."""
    match = re.search(r"Graded (\d+) submission\(s\) in [\d.]+ s(?: \((\d+) unchanged, skipped\))?",
                      log.read_text())
    assert match, log.read_text()
    return int(match[1]), int(match[2] or 0)


def rows(path: Path) -> list[str]:
    return [row["student_id"] for row in csv.DictReader(io.StringIO(path.read_text()))]


def test_sharded_class_cancelled_task_rerun_and_merged(cluster, batch, tmp_path):
    """Do the docs' array and merge grade a class as one machine does (the planted batch,
    graded in one run), and does a task cancelled midway, rerun on its own, lose nothing and
    grade nothing twice?"""
    grading = tmp_path / "grading"
    planted.build(grading / "submitted", CLASS)
    env = {"COURSE": str(ROOT), "GRADING": str(grading), "SHARDS": str(SHARDS)}
    export = f"--export=ALL,DEADLINE={planted.DEADLINE}"
    started = time.monotonic()

    array = cluster.sbatch(f"--array=1-{SHARDS}", export, env=env, cwd=tmp_path)
    shard = grading / f"out-{CANCELLED}"
    first = wait_for(lambda: sorted(shard.glob("results/*/*.json")), "shard 1's first result",
                     timeout=600, every=0.1)
    cluster.run("scancel", f"{array}_{CANCELLED}")
    kept = {p: p.read_bytes() for p in first}
    wait_for(cluster.idle, "the array and its merge", timeout=900, every=1)
    assert len(list(shard.glob("results/*/*.json"))) == 1, "task 1 finished before it was cancelled"
    (merge_log,) = tmp_path.glob("autograde-merge-*.log")
    assert f"rerun --shard {CANCELLED}/{SHARDS}" in merge_log.read_text()
    assert "sbatch --array=K" in merge_log.read_text()
    assert not (grading / "graded" / "grades.csv").exists()  # nothing merged from an incomplete class

    rerun = cluster.sbatch(f"--array={CANCELLED}", export, env=env, cwd=tmp_path)
    wait_for(cluster.idle, "the rerun and its merge", timeout=900, every=1)
    assert graded(tmp_path / f"autograde-{rerun}_{CANCELLED}.log") == (1, 1)  # resumed
    assert {p: p.read_bytes() for p in first} == kept  # the result graded before is kept as is
    for k in range(1, SHARDS + 1):
        if k != CANCELLED:
            assert graded(tmp_path / f"autograde-{array}_{k}.log") == (len(CLASS) // SHARDS, 0)
    one_machine = batch["csv"].splitlines()
    expected = [one_machine[0]] + [line for line in one_machine[1:] if line.split(",")[0] in CLASS]
    assert (grading / "graded" / "grades.csv").read_text() == "\n".join(expected) + "\n"
    assert rows(grading / "graded" / "grades.csv") == CLASS
    for student in CLASS:
        assert (grading / "graded" / "feedback" / student / planted.ASSIGNMENT).is_dir()
    print(f"array, cancel, merge, rerun, merge: {time.monotonic() - started:.0f} s")
