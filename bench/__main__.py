"""``python -m bench``: measure everything and write ``bench/report.json`` and ``bench/report.md``.

Options pick parts (``--only modules scaling``) and sizes; the defaults are the committed
report's. Run it on an otherwise idle machine: the figures are medians, but other
processes still slow both sides of each comparison (the report records the load average).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from bench import BENCH_DIR, cpu_seconds
from bench import report as report_

PARTS = ("modules", "decoding", "scaling", "notebooks", "checks", "autograde", "host")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="parts to measure")
    p.add_argument("--out", type=Path, default=BENCH_DIR, help="folder for report.json/.md and scaling.png")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads for the module and scaling figures, both sides (default 1: "
                        "the ratios compare the implementations, not thread scheduling)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each short notebook (median)")
    p.add_argument("--long-repeats", type=int, default=1,
                   help="runs of 10.6, 10.7 and 10.8 with full training")
    p.add_argument("--module-rounds", type=int, default=15, help="timed rounds per module comparison")
    p.add_argument("--lengths", type=int, nargs="+", default=None, help="sequence lengths for scaling")
    p.add_argument("--output-tokens", type=int, default=64, help="tokens each decoding run writes")
    p.add_argument("--decoding-batches", type=int, nargs="+", default=[1, 64],
                   help="batch sizes (sentences) of the decoding comparison")
    p.add_argument("--jobs", type=int, default=2, help="jobs of our autograde run")
    p.add_argument("--copies", type=int, default=1,
                   help="copies of the 4 sample submissions per assignment")
    p.add_argument("--class-sizes", type=int, nargs="+", default=[50, 500, 5000],
                   help="submissions of the synthetic classes of the host part")
    p.add_argument("--assignments", nargs="+", default=None,
                   help="assignments of the autograde class (default: the last two with learner notebooks)")
    return p


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measure(part: str, args: argparse.Namespace, devices: list[str], report: dict) -> None:
    """Measure one part into ``report`` (CUDA figures under ``cuda_<part>``)."""
    if part == "modules":
        from bench.modules import bench_modules

        for device in devices:
            key = "modules" if device == "cpu" else f"{device}_modules"
            report[key] = bench_modules(device, repeats=args.module_rounds, log=log)
    elif part == "decoding":
        from bench.decoding import bench_decoding

        for device in devices:
            key = "decoding" if device == "cpu" else f"{device}_decoding"
            report[key] = bench_decoding(device, output_tokens=args.output_tokens,
                                         batches=tuple(args.decoding_batches), log=log)
    elif part == "scaling":
        from bench.scaling import LENGTHS, bench_scaling, plot

        for device in devices:
            key = "scaling" if device == "cpu" else f"{device}_scaling"
            report[key] = bench_scaling(tuple(args.lengths or LENGTHS), device=device, log=log)
            plot(report[key], args.out / ("scaling.png" if device == "cpu" else f"scaling_{device}.png"))
    elif part == "notebooks":
        from bench.notebooks import bench_notebooks

        report["notebooks"] = bench_notebooks(repeats=args.repeats, long_repeats=args.long_repeats,
                                              log=log)
    elif part == "checks":
        from bench.checks import bench_checks

        report["checks"] = bench_checks(log=log)
    elif part == "autograde":
        from bench.autograde import bench_autograde

        report["autograde"] = bench_autograde(args.assignments, copies=args.copies, jobs=args.jobs,
                                              log=log)
    elif part == "host":
        from bench.host_scale import bench_host

        report["host"] = bench_host(tuple(args.class_sizes), jobs=args.jobs, log=log)


def run(args: argparse.Namespace) -> dict:
    started, cpu_started = time.monotonic(), cpu_seconds()
    torch.set_num_threads(args.threads)
    report: dict = {"machine": report_.machine_facts(args.threads)}
    parts: dict[str, dict] = {}
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for part in PARTS:
        if part not in args.only:
            continue
        log(f"{part} (load average {report_.load_average()})")
        parts[part] = {"load_average_start": report_.load_average(),
                       "date": report_.machine_facts(args.threads)["date"]}
        part_started = time.monotonic()
        try:
            measure(part, args, devices, report)
        except Exception as error:  # noqa: BLE001 - the other parts' figures still get written
            log(f"  {part} failed: {type(error).__name__}: {error}")
            parts[part]["error"] = f"{type(error).__name__}: {error}"
        parts[part]["seconds"] = round(time.monotonic() - part_started, 1)
        parts[part]["load_average_end"] = report_.load_average()
    report["machine"]["load_average_end"] = report_.load_average()
    report["machine"]["bench_seconds"] = round(time.monotonic() - started, 1)
    report["machine"]["bench_cpu_seconds"] = round(cpu_seconds() - cpu_started, 1)
    report["machine"]["parts"] = parts
    return report


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = report_.updated(args.out, run(args), args.only == list(PARTS))
    json_path, md_path = report_.write(report, args.out)
    print(report_.markdown(report))
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)
    return 1 if any("error" in part for part in report["machine"]["parts"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
