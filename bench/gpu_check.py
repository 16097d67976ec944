"""``make gpu-check`` (``python -m bench.gpu_check``): the GPU path in one command.

On a machine with CUDA, in under five minutes:

1. the hidden checks of every section on the solutions, on the GPU, with records saved as
   in grading, and those records verified in a clean process (``python -m grader verify``);
2. the tests of the checks (solutions, correct variants, planted bugs, tripwires,
   integrity) with pytest, counting the device every check ran on;
3. one ``python -m grader autograde`` of a small class (correct and broken notebooks of
   10.2 and 10.5) with the GPU visible: correct ones get full marks, broken ones lose
   points, the ``device`` column says cuda;
4. the module benchmark (the course's modules against PyTorch's) on the GPU;
5. 10.7's GPT trained in float32, under autocast in bfloat16, and in float16 with a gradient
   scaler (``torch.amp.GradScaler``): the losses agree and stay finite;

then prints a short report (device, torch, tolerances, what passed, times) and writes it
to ``OUT/gpu-check.md`` and ``OUT/gpu-check.json``. Exit status 1 when something failed.
Without CUDA it says so, writes the report, and exits 0. ``--device cpu`` runs the same
steps on the CPU (CUDA hidden): how the suite tests this script on machines without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import BENCH_DIR, ROOT

LIMIT_S = 300
CLASS = ("10.2-scaled-dot-product-attention", "10.5-transformer-block")
CHECK_TESTS = ("tests/test_answers.py", "tests/test_checks_s10_*.py", "tests/test_integrity.py",
               "tests/test_tripwire.py")


@dataclass
class Step:
    name: str
    ok: bool | None = None  # None: not run
    seconds: float = 0.0
    summary: str = ""
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        mark = {True: "ok    ", False: "FAILED", None: "skip  "}[self.ok]
        return f"[{mark}] {self.name} ({self.seconds:.1f} s): {self.summary}"


class Clock:
    """The whole check's time limit, shared by its steps."""

    def __init__(self, limit_s: float):
        self.start, self.limit_s = time.monotonic(), limit_s

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self, floor: float = 20.0) -> float:
        return max(floor, self.limit_s - self.elapsed())


def run_step(step: Step, work) -> Step:
    """Run ``work(step)``; any exception fails the step with its message, never the report."""
    started = time.monotonic()
    try:
        work(step)
    except Exception as error:  # noqa: BLE001 - the report says what broke and goes on
        step.ok = False
        step.summary = f"{type(error).__name__}: {str(error)[:500]}"
    step.seconds = round(time.monotonic() - started, 1)
    return step


# ---------------------------------------------------------------- facts


def facts(device: str, tolerances_for: str | None = None) -> dict:
    import torch

    from grader.checks.guarded_calls import tolerance

    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(),
            "python": platform.python_version(), "torch": torch.__version__,
            "torch_cuda_build": torch.version.cuda, "device": device,
            "cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count(),
                    capability=f"sm_{props.major}{props.minor}",
                    gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cudnn=torch.backends.cudnn.version(), driver=nvidia_driver())
    dev = torch.device(tolerances_for or device)
    info["tolerances_device"] = dev.type
    info["tolerances"] = {str(dtype).replace("torch.", ""): dict(zip(("rtol", "atol"), tolerance(dtype, dev)))
                          for dtype in (torch.float32, torch.float64)}
    info["tf32_while_checking"] = "off (grader.checks.guarded_calls.exact_matmul)"
    return info


def nvidia_driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return ""


# ---------------------------------------------------------------- 1. checks on the solutions


def solution_checks(step: Step, device: str, records: Path, clock: Clock) -> None:
    """Every exercise's hidden check on its solution, records saved, then verified elsewhere."""
    from course.checking.records import GRADING_DIR_ENV, RECORD_SUFFIX, load_record
    from grader.checks import SECTIONS
    from grader.paths import assignment_names
    from samples import load_solution_namespace

    os.environ[GRADING_DIR_ENV] = str(records)
    names = assignment_names()
    times, failed, devices = {}, [], set()
    try:
        for section, module in SECTIONS.items():
            assignment = next(n for n in names if n.startswith(section + "-"))
            namespace = load_solution_namespace(assignment)
            started = time.monotonic()
            for exercise in module.EXERCISES.values():
                try:
                    with contextlib.redirect_stdout(io.StringIO()):  # the checks' ✓ lines
                        exercise.check(namespace[exercise.name])
                except Exception as error:  # noqa: BLE001 - reported per exercise
                    failed.append(f"{exercise.name}: {type(error).__name__}: {str(error)[:200]}")
            times[section] = round(time.monotonic() - started, 2)
    finally:
        os.environ.pop(GRADING_DIR_ENV, None)
    done = subprocess.run([sys.executable, "-m", "grader", "verify", str(records)], cwd=ROOT,
                          capture_output=True, text=True, timeout=clock.left())
    verdicts = json.loads(done.stdout) if done.returncode == 0 else {}
    devices = {str(load_record(p).get("device", "?")).split(":")[0]
               for p in records.glob(f"*{RECORD_SUFFIX}")}
    rejected = [name for name, v in verdicts.items() if not v["passed"] or v["flags"]]
    count = sum(len(m.EXERCISES) for m in SECTIONS.values())
    step.details = {"seconds_per_section": times, "failed": failed, "records": len(verdicts),
                    "rejected_in_clean_process": rejected, "record_devices": sorted(devices),
                    "verify_stderr": done.stderr[-1000:] if done.returncode else ""}
    step.ok = not failed and not rejected and len(verdicts) == count and devices == {device}
    step.summary = (f"{count - len(failed)}/{count} exercises pass on {'/'.join(sorted(devices))}; "
                    f"{len(verdicts) - len(rejected)}/{count} records confirmed by a clean process "
                    f"(`python -m grader verify`); seconds per section {times}")
    if failed:
        step.summary += "; failed: " + " | ".join(failed[:3])


# ---------------------------------------------------------------- 2. the tests of the checks


def check_tests(step: Step, device: str, work: Path, clock: Clock, quick: bool) -> None:
    """pytest on the tests of the checks, counting the device the checks ran on."""
    files = ["tests/test_answers.py::test_right_answer_passes"] if quick else \
        sorted(str(p.relative_to(ROOT)) for pattern in CHECK_TESTS for p in ROOT.glob(pattern))
    junit, devices = work / "junit.xml", work / "devices"
    workers = max(1, min(4, (os.cpu_count() or 2) // 2))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-p", "bench.gpu_pytest_plugin", f"--junitxml={junit}", *files]
    if workers > 1:
        command[5:5] = ["-n", str(workers)]
    env = {**os.environ, "GPU_CHECK_DEVICES": str(devices)}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=clock.left(60))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failing = []
    if junit.exists():
        for suite in ET.parse(junit).getroot().iter("testsuite"):
            for key in counts:
                counts[key] += int(suite.get(key, 0))
        for case in ET.parse(junit).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failing.append(f"{case.get('classname')}::{case.get('name')}")
    calls: dict[str, int] = {}
    for path in work.glob("devices.*"):
        for kind, n in json.loads(path.read_text()).items():
            calls[kind] = calls.get(kind, 0) + n
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    step.details = {**counts, "failing": failing, "check_device_calls": calls, "files": files,
                    "output_tail": done.stdout[-3000:] if done.returncode else ""}
    step.ok = done.returncode == 0 and passed > 0 and set(calls) == {device}
    step.summary = (f"{passed} passed, {counts['failures'] + counts['errors']} failed, "
                    f"{counts['skipped']} skipped in {len(files)} file(s); the checks ran on "
                    + ", ".join(f"{k} {v} times" for k, v in sorted(calls.items())))
    if failing:
        step.summary += "; failing: " + ", ".join(failing[:5])


# ---------------------------------------------------------------- 3. a class, autograded


def autograde_class(step: Step, device: str, work: Path, clock: Clock, quick: bool) -> None:
    """``python -m grader autograde`` of correct and broken notebooks, the GPU visible."""
    from samples import benchmark_set

    assignments = list(CLASS[:1] if quick else CLASS)
    submissions = benchmark_set(work / "submitted", assignments, copies=1)
    if quick:
        for kind in ("syntax", "exception"):
            for folder in submissions.glob(f"{kind}-*"):
                shutil.rmtree(folder)
    out = work / "graded"
    jobs = max(1, min(4, (os.cpu_count() or 2) // 2))
    command = [sys.executable, "-m", "grader", "autograde", str(submissions), "--out", str(out),
               "--jobs", str(jobs), "--timeout", "120", "--quiet"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=clock.left(60))
    rows = list(csv.DictReader((out / "grades.csv").open())) if (out / "grades.csv").exists() else []

    def kind(row: dict) -> str:
        return row["student_id"].rsplit("-", 1)[0]

    full = [r for r in rows if float(r["score"]) == float(r["max_score"]) > 0 and r["status"] == "ok"]
    # correct: full marks; wrong answer, syntax error: points lost; an exception raised after
    # the exercise's code (samples.benchmark_set): full marks, the error noted
    expected_full = [r for r in rows if kind(r) in ("correct", "exception")]
    expected_lost = [r for r in rows if kind(r) in ("wrong", "syntax")]
    right = [r for r in expected_full if r in full] + [r for r in expected_lost if r not in full]
    noted = all("RuntimeError" in r["reason"] for r in rows if kind(r) == "exception")
    seen = sorted({r["device"].split(":")[0] for r in rows if r["device"]})
    step.details = {"command": " ".join(command[1:]), "summary": done.stdout.strip()[-1500:],
                    "stderr": done.stderr[-1500:] if done.returncode else "",
                    "rows": [{k: r[k] for k in ("student_id", "assignment", "score", "max_score",
                                                "status", "reason", "device")} for r in rows]}
    step.ok = (done.returncode == 0 and len(rows) == len(assignments) * (2 if quick else 4)
               and len(right) == len(rows) and noted and seen == [device])
    step.summary = (f"{len(rows)} notebooks ({', '.join(assignments)}) with --jobs {jobs}: "
                    f"{len(right)}/{len(rows)} graded as expected (correct and exception-after-the-"
                    f"code full marks, wrong and syntax error lose points), device column "
                    f"{seen or 'empty'}")
    sandbox = next((line for line in done.stdout.splitlines() if line.startswith("Sandbox:")), "")
    if sandbox:
        step.summary += f"; {sandbox}"
    if done.returncode:
        step.summary += f"; exit {done.returncode}: {done.stderr.strip()[-300:]}"


# ---------------------------------------------------------------- 4. the module benchmark


def module_benchmark(step: Step, device: str, quick: bool) -> None:
    from bench.modules import bench_modules

    timing = {"round_s": 0.01, "profile": False} if quick else {}
    result = bench_modules(device, repeats=3 if quick else 7, log=lambda _: None, **timing)
    ratios = {name: entry.get("ratio") for name, entry in result.items() if name != "config"}
    step.details = {name: {k: entry.get(k) for k in ("ours_s", "torch_s", "ratio", "reason")}
                    for name, entry in result.items() if name != "config"}
    step.ok = all(r is not None for r in ratios.values())
    step.summary = ", ".join(f"{name} ours/torch {r:.2f}" if r is not None else f"{name}: not measured"
                             for name, r in ratios.items())


# ---------------------------------------------------------------- 5. mixed precision


def mixed_precision(step: Step, device: str, quick: bool) -> None:
    """10.7's GPT (the solution) trained the same number of steps, the same seed and batches, in
    float32, under autocast in bfloat16, and in float16 with a gradient scaler: every loss finite
    and within 0.1 nats of float32's last one."""
    import torch

    from course.gpt import gpt2_init, load_sentences, train_lm
    from course.translation import PAD, Vocab
    from samples import load_solution_namespace

    notebook = load_solution_namespace("10.7-gpt")
    sentences = load_sentences("train")
    vocab = Vocab.from_sentences(sentences)
    steps = 20 if quick else 200
    lm_loss, lm_step, lr_at = notebook["lm_loss"], notebook["lm_step"], lambda s: 3e-3
    scaler = torch.amp.GradScaler(device)
    step.details = {}

    def float16_step(model, ids, optimizer, scheduler, loss_fn, label_smoothing=0.0):
        """lm_step in float16: the loss scaled up for backward, the gradients back before clipping."""
        model.train()
        with torch.autocast(device, dtype=torch.float16):
            logits = model(ids[:, :-1])  # (B, n - 1, V)
        loss = loss_fn(logits.float(), ids[:, 1:], PAD, label_smoothing)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        return loss.item()

    runs = {"float32": lm_step, "bfloat16": functools.partial(lm_step, autocast_dtype=torch.bfloat16),
            "float16 + GradScaler": float16_step}
    losses = {}
    for name, train_step in runs.items():
        torch.manual_seed(0)
        model = gpt2_init(notebook["GPT"](len(vocab), pad_id=PAD, **notebook["GPT_SIZE"])).to(device)
        history = train_lm(model, sentences, vocab, lm_loss, lr_at, steps, step=train_step, progress=False)
        losses[name] = sum(history.losses[-5:]) / 5
        step.details[name] = {"last_loss": round(losses[name], 4),
                              "ms_per_step": round(history.seconds / steps * 1e3, 2)}
    step.details["grad_scale"] = scaler.get_scale()
    step.ok = step.details["grad_scale"] > 0 and all(
        math.isfinite(loss) and abs(loss - losses["float32"]) < 0.1 for loss in losses.values())
    runs_text = ", ".join(f"{name} loss {step.details[name]['last_loss']:.3f} "
                          f"({step.details[name]['ms_per_step']:.1f} ms a step)" for name in runs)
    step.summary = f"{steps} steps; {runs_text}; grad scale {step.details['grad_scale']:g}"


# ---------------------------------------------------------------- the report


def report_text(info: dict, steps: list[Step], total_s: float, limit_s: float) -> str:
    lines = [f"make gpu-check, {info['date']} on {info['host']}"]
    if info["device"] == "cuda":
        lines.append(f"device: {info['gpu']} ({info['capability']}, {info['gpu_memory_gib']} GiB, "
                     f"{info['gpus']} visible), driver {info.get('driver') or '?'}, "
                     f"CUDA {info['torch_cuda_build']}, cuDNN {info['cudnn']}")
    else:
        lines.append(f"device: {info['device']}")
    lines.append(f"torch {info['torch']}, Python {info['python']}, {info['cpu_cores']} CPU cores, "
                 f"load {info['load_average']}")
    tol = info["tolerances"]
    lines.append(f"tolerances of the checks on {info['tolerances_device']}: " + "; ".join(
        f"{dtype} rtol {t['rtol']:g} atol {t['atol']:g}" for dtype, t in tol.items())
        + f"; TF32 {info['tf32_while_checking']}")
    lines += [step.line() for step in steps]
    verdict = "PASSED" if steps and all(s.ok for s in steps) else ("NOT RUN" if not steps else "FAILED")
    lines.append(f"{verdict} in {total_s:.0f} s (limit {limit_s:.0f} s)")
    return "\n".join(lines) + "\n"


def write_report(out: Path, info: dict, steps: list[Step], text: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-check.md").write_text(text)
    (out / "gpu-check.json").write_text(json.dumps({"facts": info, "steps": [asdict(s) for s in steps]},
                                                   indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out", help="folder for gpu-check.md/.json")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: run every step with CUDA hidden (tests this script without a GPU)")
    parser.add_argument("--quick", action="store_true", help="a smaller version of each step (tests)")
    parser.add_argument("--limit", type=float, default=LIMIT_S, help="seconds for the whole check")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # before torch looks; inherited by every child
    import matplotlib

    matplotlib.use("Agg")
    import torch

    clock = Clock(args.limit)
    if args.device == "cuda" and not torch.cuda.is_available():
        info = facts("cpu", tolerances_for="cuda")
        info["device"] = (f"no CUDA here (torch {torch.__version__}, CUDA build {torch.version.cuda}, "
                          "torch.cuda.is_available() is False): the GPU path was not checked")
        text = report_text(info, [], clock.elapsed(), args.limit)
        write_report(args.out, info, [], text)
        print(text + f"report: {args.out / 'gpu-check.md'}")
        return 0
    info = facts(args.device)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        work = Path(scratch)
        for name in ("records", "tests", "class"):
            (work / name).mkdir()
        steps = [
            run_step(Step("hidden checks on the solutions + integrity records verified in a clean process"),
                     lambda s: solution_checks(s, args.device, work / "records", clock)),
            run_step(Step("tests of the checks: solutions, correct variants, planted bugs, tripwires"),
                     lambda s: check_tests(s, args.device, work / "tests", clock, args.quick)),
            run_step(Step(f"autograde of a small class, {args.device} visible to the kernels"),
                     lambda s: autograde_class(s, args.device, work / "class", clock, args.quick)),
            run_step(Step(f"module benchmark on {args.device}"),
                     lambda s: module_benchmark(s, args.device, args.quick)),
            run_step(Step(f"mixed precision: 10.7's GPT in float32, bfloat16 and float16 on {args.device}"),
                     lambda s: mixed_precision(s, args.device, args.quick)),
        ]
    total = clock.elapsed()
    if total > args.limit:
        steps.append(Step("time limit", False, round(total, 1),
                          f"took {total:.0f} s, limit {args.limit:.0f} s"))
    text = report_text(info, steps, total, args.limit)
    write_report(args.out, info, steps, text)
    print(text + f"report: {args.out / 'gpu-check.md'} (details: gpu-check.json)")
    return 0 if all(step.ok for step in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
