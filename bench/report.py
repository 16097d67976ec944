"""The machine's facts, and the report: ``bench/report.json`` and the table ``bench/report.md``."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path

import torch


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float]:
    """1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine_facts(threads: int) -> dict:
    """What the figures were measured on."""
    import psutil

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    cuda = torch.cuda.is_available()
    facts = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": cores,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": threads,
        "device": (f"cpu and cuda ({torch.cuda.get_device_name(0)})" if cuda
                   else "cpu only (torch.cuda.is_available() is False: no GPU measured)"),
        "cuda": cuda,
        "load_average_start": load_average(),
    }
    try:
        import nbgrader

        facts["nbgrader"] = nbgrader.__version__
    except ImportError:
        pass
    return facts


# ---------------------------------------------------------------- the table


def _num(value, fmt: str = "{:.2f}", none: str = "n/a") -> str:
    return none if value is None else fmt.format(value)


def _ms(seconds) -> str:
    return _num(None if seconds is None else seconds * 1e3, "{:.2f}")


def _ok(flag) -> str:
    return "n/a" if flag is None else ("yes" if flag else "**no**")


def machine_line(m: dict) -> str:
    load = m.get("load_average_start") or []
    end = m.get("load_average_end") or []
    return (f"{m['date']}, {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, {m['os']}, "
            f"Python {m['python']}, torch {m['torch']} ({m['torch_threads']} thread(s) for the "
            f"module and scaling figures), nbgrader {m.get('nbgrader', 'n/a')}; device: "
            f"{m['device']}; load average (1/5/15 min) {'/'.join(map(str, load))} at the start, "
            f"{'/'.join(map(str, end))} at the end; the whole run took "
            f"{_num(m.get('bench_seconds'), '{:.0f}')} s, {_num(m.get('bench_cpu_seconds'), '{:.0f}')} "
            "CPU seconds"
            + (" (" + ", ".join(f"{name} {p['seconds']:.0f} s" for name, p in m["parts"].items()) + ")"
               if m.get("parts") else "") + ".")


def notebooks_table(notebooks: dict) -> list[str]:
    lines = ["| notebook | seconds (median) | runs | target | peak RSS (MB) | target | errors "
             "| meets targets |",
             "|---|---:|---|---:|---:|---:|---:|---|"]
    for section, e in notebooks.items():
        runs = ", ".join(f"{s:.1f}" for s in e["seconds_runs"])
        lines.append(f"| {section} | {e['seconds']:.1f} | {runs} | < {e['target_seconds']:.0f} s "
                     f"| {e['peak_rss_mb']:.0f} | < {e['target_peak_rss_mb']:.0f} "
                     f"| {len(e['errors'])} | {_ok(e['meets_targets'])} |")
    return lines


def _percent(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.0f} %"


def ceiling_lines(a: dict) -> list[str]:
    """The machine's parallel ceiling and our speedup as a share of it."""
    c = a.get("ceiling")
    if not c:
        return []
    return [f"| the machine's ceiling: {c['streams']} plain nbclient runs of the {c['notebooks']} notebooks "
            "| one after another (s) | at once (s) | ceiling | CPU s: after / at once "
            "| our speedup, share of it | target | meets target |",
            "|---|---:|---:|---:|---|---:|---:|---|",
            f"| {c['threads_per_kernel']} thread(s) per kernel | {c['serial_s']:.1f} | {c['parallel_s']:.1f} "
            f"| {_num(c['speedup'])} | {c['serial_cpu_s']:.0f} / {c['parallel_cpu_s']:.0f} "
            f"| {_percent(a.get('share_of_ceiling'))} | >= {_percent(a.get('target_share'))} "
            f"| {_ok(a.get('meets_target'))} |"]


def autograde_table(a: dict) -> list[str]:
    lines = [f"| stock nbgrader, serial (s) | ours, --jobs {a.get('jobs')} (s) | speedup | target "
             "| ours, --jobs 1 (s) | speedup | target | CPU s: stock / ours --jobs "
             f"{a.get('jobs')} / ours --jobs 1 |",
             "|---:|---:|---:|---:|---:|---:|---:|---|",
             (f"| {_num(a.get('serial_nbgrader_s'), '{:.1f}')} | {_num(a.get('parallel_s'), '{:.1f}')} "
              f"| {_num(a.get('speedup'))} | >= {_percent(a.get('target_share'))} of the ceiling "
              f"| {_num(a.get('serial_s'), '{:.1f}')} | {_num(a.get('serial_speedup'))} | >= 1.0 "
              f"| {_num(a.get('serial_nbgrader_cpu_s'), '{:.0f}')} / "
              f"{_num(a.get('parallel_cpu_s'), '{:.0f}')} / {_num(a.get('serial_cpu_s'), '{:.0f}')} |")]
    if a.get("reason"):
        lines.append(f"\nNot measured: {a['reason']}")
        return lines
    lines += ["", *ceiling_lines(a)]
    phases = a.get("cpu_by_phase") or {}
    if phases:
        names = list(dict.fromkeys(n for p in phases.values() for n in p))
        lines += ["", "| CPU seconds by phase | " + " | ".join(names) + " | total |",
                  "|---|" + "---:|" * (len(names) + 1)]
        for side, p in phases.items():
            lines.append(f"| {side} | " + " | ".join(_num(p.get(n), "{:.1f}", "") for n in names)
                         + f" | {sum(p.values()):.1f} |")
    if a.get("submissions"):
        lines.append(f"\n{a.get('notebooks', len(a['submissions']))} submissions of "
                     f"{', '.join(a.get('assignments', []))} (correct, wrong answer, syntax error, "
                     f"exception), {a.get('threads_per_kernel')} thread(s) per kernel in our run. "
                     "Phases: stock nbgrader's own process and its kernels; ours: autograde "
                     "(nbgrader and the kernel), verify (records, cells), feedback, prepare and "
                     "publish, other (the workers' start-up, the run's process). Overhead "
                     f"ratio {_num(a.get('overhead_ratio'))}: our grading time of the correct "
                     "submissions over their plain nbclient runs.")
    sandbox = a.get("sandbox_cost") or {}
    if sandbox:
        faster = (sandbox.get("cpu_s_per_notebook") or 0) < 0
        lines.append(f"The sandbox's cost ({sandbox.get('files')}): "
                     f"{_num(sandbox.get('wall_s_per_notebook'))} s of wall time and "
                     f"{_num(sandbox.get('cpu_s_per_notebook'))} s of CPU per notebook "
                     f"({sandbox.get('notebooks')} correct notebooks graded one at a time with and "
                     "without it" + ("; negative: the run with the sandbox was the cheaper one"
                                     if faster else "") + ").")
    if a.get("score_differences"):
        lines.append(f"Scores that differ from stock nbgrader: {'; '.join(a['score_differences'])}.")
    return lines


def checks_table(checks: dict) -> list[str]:
    def row(label: str, key: str, met: str) -> str:
        return f"| {label} | " + " | ".join(
            _num(e.get(key)) + ("" if e.get(met, True) else " **over**") for e in checks.values()) + " |"

    lines = ["| section | " + " | ".join(checks) + " |", "|---|" + "---:|" * len(checks),
             row("hidden checks, CPU seconds (target < 2)", "cpu_s", "meets_target")]
    if any("visible_cpu_s" in e for e in checks.values()):
        lines.append(row("visible tests, CPU seconds once warm (target < 1)", "visible_cpu_s",
                         "visible_meets_target"))
    return lines


def modules_table(modules: dict, device: str = "cpu") -> list[str]:
    lines = [f"| module ({device}, forward + backward) | ours (ms) | torch (ms) | ratio | target |",
             "|---|---:|---:|---:|---:|"]
    for name, e in modules.items():
        if name == "config":
            continue
        ratio = _num(e.get("ratio"))
        lines.append(f"| {name} | {_ms(e.get('ours_s'))} | {_ms(e.get('torch_s'))} | {ratio} "
                     f"| <= {e.get('target_ratio')} |" + (f" ({e['reason']})" if e.get("reason") else ""))
    return lines


def decoding_table(decoding: dict, device: str = "cpu") -> list[str]:
    lines = [f"| batch ({device}) | output tokens | greedy_decode (ms) | greedy_decode_cached (ms) | ratio "
             "| target | same ids |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for name, e in decoding.items():
        if not name.startswith("batch_"):
            continue
        lines.append(f"| {e['batch']} | {e['output_tokens']} | {_ms(e['uncached_s'])} | {_ms(e['cached_s'])} "
                     f"| {_num(e['ratio'])} | >= {e['target_ratio']} | {_ok(e['same_ids'])} |")
    if decoding.get("reason"):
        lines.append(f"\nNot measured: {decoding['reason']}")
    return lines


def scaling_table(scaling: dict) -> list[str]:
    course, torch_ = scaling["course"], scaling["torch_sdpa"]
    slopes = {name: [None, *scaling[name].get("local_exponents", [])] for name in ("course", "torch_sdpa")}
    lines = ["| n | course (ms) | F.sdpa (ms) | slope from n/2: course, F.sdpa | course peak (MB) "
             "| F.sdpa peak (MB) |",
             "|---:|---:|---:|---:|---:|---:|"]
    for i, n in enumerate(course["lengths"]):
        slope = ("" if slopes["course"][i] is None and slopes["torch_sdpa"][i] is None
                 else f"{_num(slopes['course'][i])}, {_num(slopes['torch_sdpa'][i])}")
        lines.append(f"| {n} | {_ms(course['seconds'][i])} | {_ms(torch_['seconds'][i])} | {slope} "
                     f"| {course['peak_mb'][i]:.1f} | {torch_['peak_mb'][i]:.1f} |")
    lines.append(f"| **fitted exponent** (n >= {scaling['setup']['fit_from_length']}) | "
                 f"**{_num(course['exponent'])}** | **{_num(torch_['exponent'])}** | "
                 f"| **{_num(course['memory_exponent'])}** | **{_num(torch_['memory_exponent'])}** |")
    return lines


def measured_apart(report: dict, part: str) -> list[str]:
    """A line saying when and at what load ``part`` was measured, where that was not in the run the
    report's first line describes (``--only`` later), and its ``note`` if it has one."""
    machine = report["machine"]
    p = machine.get("parts", {}).get(part, {})
    started = dt.datetime.fromisoformat(machine["date"])
    run_end = started + dt.timedelta(seconds=machine.get("bench_seconds", 0))
    if not p.get("date") or dt.datetime.fromisoformat(p["date"]) <= run_end:
        return [p["note"], ""] if p.get("note") else []
    line = (f"This table is from `python -m bench --only {part}` at {p['date']} (load average "
            f"{'/'.join(map(str, p.get('load_average_start', [])))} at the start, "
            f"{'/'.join(map(str, p.get('load_average_end', [])))} at the end), after the run above.")
    return [line + (f" {p['note']}" if p.get("note") else ""), ""]


def markdown(report: dict) -> str:
    """The readable report: the machine, then one table per part measured."""
    out = ["# Benchmarks", "", "Measured by `make bench` (`python -m bench`) in one run: "
           + machine_line(report["machine"]), ""]
    failed = {k: p["error"] for k, p in report["machine"].get("parts", {}).items() if "error" in p}
    if failed:
        out += ["**Parts that failed:** " + "; ".join(f"{k}: {e}" for k, e in failed.items()), ""]
    if "notebooks" in report:
        out += ["## Solution notebooks, start to finish (kernel start included, full training)", "",
                *notebooks_table(report["notebooks"]), "", *measured_apart(report, "notebooks")]
    if "checks" in report:
        out += ["## The checks of one notebook (fresh process, solution)", "",
                *checks_table(report["checks"]), "", *measured_apart(report, "checks")]
    if "autograde" in report:
        out += ["## Autograding the same class", "", *autograde_table(report["autograde"]), "",
                *measured_apart(report, "autograde")]
    if "host" in report:
        part = report["machine"].get("parts", {}).get("host", {})
        out += ["## The host's cost per submission as the class grows", "",
                f"Measured {part.get('date', '')}, load average {part.get('load_average_start')} "
                f"at the start, {part.get('load_average_end')} at the end.", "",
                *host_table(report["host"]), ""]
    if "modules" in report:
        cfg = report["modules"].get("config", {})
        out += ["## The course's modules against PyTorch's", "",
                f"Model size: {cfg.get('source', '')}; medians of alternating timed rounds.", "",
                *modules_table(report["modules"]), ""]
    if "decoding" in report:
        cfg = report["decoding"].get("config", {})
        out += ["## Greedy decoding with and without a KV cache", "",
                f"Model size: {cfg.get('source', '')}; untrained; every sentence runs to "
                f"{cfg.get('output_tokens')} tokens; medians of alternating timed rounds.", "",
                *decoding_table(report["decoding"]), ""]
    if "scaling" in report:
        s = report["scaling"]["setup"]
        out += ["## Attention against sequence length", "",
                (f"One head, d={s['d']}, batch {s['batch']}, {s['pass']}, {s['device']}; peak = "
                 "memory allocated by the call beyond its inputs. Figure: `bench/scaling.png`."), "",
                *scaling_table(report["scaling"]), ""]
    tables = {"cuda_modules": lambda r: modules_table(r, "cuda"),
              "cuda_decoding": lambda r: decoding_table(r, "cuda"), "cuda_scaling": scaling_table}
    for key, table in tables.items():
        if key in report:
            out += [f"## {key.replace('_', ' ')}", "", *table(report[key]), ""]
    return "\n".join(out)


def updated(folder: Path, report: dict, whole: bool) -> dict:
    """``report``, or, when only some parts were measured (``--only``), the report already in
    ``folder`` with those parts replaced; each part keeps the date and load it was measured at
    (``machine.parts``)."""
    path = folder / "report.json"
    if whole or not path.is_file():
        return report
    old = json.loads(path.read_text())
    parts = {**old["machine"].get("parts", {}), **report["machine"]["parts"]}
    return {**old, **{k: v for k, v in report.items() if k != "machine"},
            "machine": {**old["machine"], "parts": parts}}


def host_table(h: dict) -> list[str]:
    rows = ["| submissions | host CPU s | ms per submission | wall s | peak MB | results JSON KB each |",
            "|---:|---:|---:|---:|---:|---:|"]
    for size, r in h["sizes"].items():
        rows.append(f"| {size} | {r['host_cpu_s']:.2f} | {r['host_cpu_ms_per_submission']:.2f} | "
                    f"{r['wall_s']:.1f} | {r['peak_mb']:.0f} | {r['results_json_kb_per_submission']:.2f} |")
    return rows + ["", f"Per-submission host CPU, largest class / smallest: "
                   f"{h['cpu_ratio_largest_to_smallest']} (target at most {h['target_cpu_ratio']}); "
                   f"one more submission costs {h['marginal_host_cpu_ms_per_submission']} ms of host "
                   f"CPU and {h['marginal_kb_per_submission']} KB of peak memory. Workers grade with a "
                   f"stand-in of {1000 * h['stand_in_cpu_s']:.0f} ms CPU (`bench/host_scale.py`), "
                   f"--jobs {h['jobs']}."]


#: The heading of report.md's last part: dated measurements of earlier runs and of what
#: ``make bench`` does not measure, written by hand; a new run keeps it as it was.
KEPT = "## Earlier measurements (kept by hand: `make bench` rewrites only what is above)"


def kept_part(md_path: Path) -> str:
    """The part of an existing report.md from :data:`KEPT` on (empty where there is none)."""
    text = md_path.read_text() if md_path.is_file() else ""
    start = text.find(KEPT)
    return "" if start < 0 else text[start:]


def write(report: dict, folder: Path) -> tuple[Path, Path]:
    """``report.json`` and ``report.md`` in ``folder`` (report.md's :data:`KEPT` part kept)."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, md_path = folder / "report.json", folder / "report.md"
    kept = kept_part(md_path)
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(markdown(report) + ("\n" + kept if kept else ""))
    return json_path, md_path
