"""``make gpu-check`` (bench/gpu_check.py): correct where there is no GPU, and its GPU path
exercised end to end on the CPU (``--device cpu``) so that it works the first time on CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import gpu_check
from grader.checks import SECTIONS
from tests.settings import ROOT


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return subprocess.run([sys.executable, "-m", "bench.gpu_check", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # fresh Python processes that import torch
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: make gpu-check runs it")
def test_without_cuda_it_says_so_and_exits_0(tmp_path):
    """No CUDA: one clear sentence, the tolerances the GPU would use, exit 0, a report file."""
    done = run("--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "no CUDA here" in done.stdout and "the GPU path was not checked" in done.stdout
    assert "tolerances of the checks on cuda: float32 rtol 0.0001 atol 5e-05" in done.stdout
    assert "NOT RUN" in done.stdout
    assert (tmp_path / "gpu-check.md").read_text() in done.stdout
    assert json.loads((tmp_path / "gpu-check.json").read_text())["steps"] == []


def test_make_target_runs_the_module(tmp_path):
    """Does ``make gpu-check`` run this module, with its output folder overridable? (make's own
    dry run of the target, this environment's stamp taken as made)"""
    venv = Path(sys.prefix)
    done = subprocess.run(["make", "-n", "-o", str(venv / ".installed"), "gpu-check", f"VENV={venv}",
                           f"GPU_CHECK_OUT={tmp_path}", "--no-print-directory"], cwd=ROOT,
                          capture_output=True, text=True, check=True,
                          env={**os.environ, "MAKEFLAGS": "", "MAKELEVEL": ""})
    assert done.stdout.split() == [f"{venv}/bin/python", "-m", "bench.gpu_check", "--out", str(tmp_path)]


def test_a_failing_step_fails_the_report_not_the_run():
    """A step that raises is reported FAILED with its message, and the verdict is FAILED."""
    def broken(step):
        raise RuntimeError("no kernel image is available for execution on the device")

    step = gpu_check.run_step(gpu_check.Step("hidden checks"), broken)
    assert step.ok is False and "no kernel image" in step.summary
    info = gpu_check.facts("cpu")
    text = gpu_check.report_text(info, [step, gpu_check.Step("other", True, 1.0, "fine")], 12, 300)
    assert "[FAILED] hidden checks" in text and text.rstrip().endswith("FAILED in 12 s (limit 300 s)")


@pytest.mark.slow
def test_every_step_runs_end_to_end_with_cuda_hidden(tmp_path):
    """Every step of the GPU path, run on the CPU in its quick form: all pass, the checks
    and the autograded class really ran on the device the report names, in the time limit."""
    done = run("--device", "cpu", "--quick", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    steps = {s["name"].split(":")[0]: s for s in report["steps"]}
    assert len(steps) == 5 and all(s["ok"] for s in steps.values()), steps
    checks = next(s for name, s in steps.items() if name.startswith("hidden checks"))
    count = sum(len(module.EXERCISES) for module in SECTIONS.values())
    assert checks["details"]["record_devices"] == ["cpu"] and checks["details"]["records"] == count
    tests = next(s for name, s in steps.items() if name.startswith("tests of the checks"))
    assert set(tests["details"]["check_device_calls"]) == {"cpu"} and tests["details"]["failures"] == 0
    graded = next(s for name, s in steps.items() if name.startswith("autograde"))
    assert {r["device"] for r in graded["details"]["rows"]} == {"cpu"}
    assert "PASSED in" in done.stdout and report["facts"]["device"] == "cpu"
    precision = next(s for name, s in steps.items() if name.startswith("mixed precision"))["details"]
    assert {"float32", "bfloat16", "float16 + GradScaler"} <= set(precision) and precision["grad_scale"] > 0
