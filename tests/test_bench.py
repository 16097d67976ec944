"""Does the benchmark measure what its report claims? (A smoke test at tiny sizes: it checks
the report's keys and that its ratios come from the measured times, never how fast anything is.)"""

import json
import math
import statistics

import nbformat
import pytest
import torch

import samples
from bench import modules, notebooks, report, scaling
from bench.__main__ import build_parser
from bench.timing import interleaved_medians, median_seconds
from grader.paths import section_of

TINY = modules.ModelConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, batch=2, seq=3)


@pytest.fixture(autouse=True)
def one_thread():
    """Are the benchmarks' threads restored after each test? (they set torch's)"""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_medians_are_of_the_samples():
    """Is the reported time the median of the recorded samples, one per round?"""
    calls = []
    result = median_seconds(lambda: calls.append(1), repeats=5, warmup=2, inner=3)
    assert len(calls) == 2 + 5 * 3
    assert len(result["samples_s"]) == 5
    assert result["median_s"] == sorted(result["samples_s"])[2]
    both = interleaved_medians({"a": lambda: None, "b": lambda: None}, repeats=3, warmup=0)
    assert set(both) == {"a", "b"} and all(len(v["samples_s"]) == 3 for v in both.values())


def test_fit_exponent_recovers_a_known_power():
    """Does the log-log fit find 2 for n**2 and ignore lengths below the cut-off?"""
    lengths = [64, 128, 256, 512, 1024]
    values = [n**2 if n >= 256 else 1.0 for n in lengths]
    assert scaling.fit_exponent(lengths, values, fit_from=256) == pytest.approx(2.0)
    assert scaling.fit_exponent([512], [1.0]) is None


def test_scaling_report_has_series_exponents_and_figure(tmp_path):
    """Does the scaling part give both implementations' series, exponents and a figure?"""
    result = scaling.bench_scaling(lengths=(16, 32, 64), repeats=1, fit_from=16, log=lambda _: None)
    for impl in ("course", "torch_sdpa"):
        entry = result[impl]
        assert entry["lengths"] == [16, 32, 64]
        assert len(entry["seconds"]) == len(entry["peak_mb"]) == 3
        assert all(t > 0 for t in entry["seconds"])
        assert isinstance(entry["exponent"], float)
    assert result["course"]["peak_mb"][-1] > 0  # the course's version keeps an n x n matrix
    assert scaling.plot(result, tmp_path / "scaling.png").stat().st_size > 0


@pytest.mark.parametrize("bench", [modules.bench_mha, modules.bench_block])
def test_module_ratio_is_ours_over_torch(bench):
    """Is each module's ratio the measured time of ours over PyTorch's, with both profiles?"""
    assignment = modules.A_10_3 if bench is modules.bench_mha else modules.A_10_5
    ns = modules.solution(assignment)
    if ns is None:
        pytest.skip(f"{assignment} has no solution notebook yet")
    entry = bench(ns, TINY, torch.device("cpu"), repeats=2, round_s=1e-3)
    assert entry["ours_s"] > 0 and entry["torch_s"] > 0
    assert entry["ratio"] == entry["ours_s"] / entry["torch_s"]
    assert entry["ours_s"] == statistics.median(entry["ours_samples_s"])
    assert entry["torch_s"] == statistics.median(entry["torch_samples_s"])
    for side in ("ours", "torch"):
        assert entry["profile"][side]["aten_ops_per_call"] > 0


def test_transformer_step_against_nn_transformer():
    """Does the training-step comparison build both models and compute its ratio?"""
    ns = modules.solution(modules.A_10_6)
    if ns is None:
        pytest.skip("10.6 has no solution notebook yet")
    entry = modules.bench_transformer_step(ns, TINY, torch.device("cpu"), repeats=1, round_s=1e-3,
                                           profile=False)
    assert entry["ratio"] == entry["ours_s"] / entry["torch_s"]
    assert entry["parameters"]["ours"] == entry["parameters"]["torch"]  # the same model, twice


def test_missing_solution_gives_null_figures_with_a_reason():
    """Is a comparison that cannot run recorded as nulls with the reason, not dropped?"""
    entry = modules.unavailable("solutions/10.6 does not exist yet")
    assert entry["ours_s"] is entry["torch_s"] is entry["ratio"] is None
    assert "10.6" in entry["reason"]
    assert modules.model_config(None) == modules.ModelConfig()
    cfg = modules.model_config({"CONFIG": {"d_model": 32, "heads": 2}})
    assert (cfg.d_model, cfg.num_heads) == (32, 2)


@pytest.mark.slow
def test_notebook_run_reports_seconds_and_peak_memory(tmp_path):
    """Does one notebook run report wall time, the kernel's peak memory and its errors?"""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = bytearray(256 * 2**20)"),
                                         nbformat.v4.new_code_cell("1 / 0")])
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    result = notebooks.run_once(path, timeout=60)
    assert result["seconds"] > 0
    assert result["peak_rss_mb"] >= 256  # the kernel held 256 MB (an idle kernel: under 150 MB)
    assert result["peak_rss_mb"] == max(result["kernel_maxrss_mb"], result["tree_polled_mb"])
    assert len(result["errors"]) == 1 and "ZeroDivisionError" in result["errors"][0]


@pytest.mark.slow
def test_hidden_checks_cpu_per_notebook():
    """Are the hidden checks and the visible tests of a notebook timed in a fresh process,
    against their targets?"""
    from bench.checks import bench_checks

    figures = bench_checks(["10.1-self-attention"], log=lambda _: None)["10.1"]
    assert figures["cpu_s"] > 0 and figures["visible_cpu_s"] > 0
    assert figures["meets_target"] == (figures["cpu_s"] < 2.0)
    assert figures["visible_meets_target"] == (figures["visible_cpu_s"] < 1.0)


def test_notebooks_are_discovered_by_section():
    """Are the solution notebooks found and keyed by section ("10.1", ...)?"""
    found = notebooks.discover()
    assert "10.1" in found and found["10.1"].suffix == ".ipynb"
    assert section_of("10.6-encoder-decoder") == "10.6"


def test_report_files_have_the_keys_and_the_tables(tmp_path):
    """Do report.json and report.md hold every part, in the keys the issue names?"""
    machine = report.machine_facts(threads=1)
    machine.update(load_average_end=report.load_average(), bench_seconds=1.0)
    result = {
        "machine": machine,
        "notebooks": {"10.1": {"seconds": 1.0, "seconds_runs": [1.0], "peak_rss_mb": 300.0,
                               "target_seconds": 20.0, "target_peak_rss_mb": 1536.0, "errors": [],
                               "meets_targets": True}},
        "autograde": {"serial_nbgrader_s": 10.0, "parallel_s": 5.0, "jobs": 2, "speedup": 2.0,
                      "serial_s": 9.5, "serial_speedup": 1.05, "overhead_ratio": 1.2,
                      "target_share": 0.95, "share_of_ceiling": 0.87, "meets_target": False,
                      "ceiling": {"streams": 2, "notebooks": 8, "threads_per_kernel": 1, "serial_s": 12.0,
                                  "parallel_s": 5.2, "speedup": 2.3, "serial_cpu_s": 11.0,
                                  "parallel_cpu_s": 11.5},
                      "cpu_by_phase": {"stock nbgrader, serial": {"nbgrader": 2.0, "kernels": 7.0},
                                       "ours, --jobs 2": {"autograde": 7.5, "verify": 0.3,
                                                          "feedback": 0.8, "other": 0.2}},
                      "sandbox_cost": {"notebooks": 2, "wall_s_per_notebook": 0.12,
                                       "cpu_s_per_notebook": 0.05, "files": "isolated"}},
        "checks": {"10.1": {"cpu_s": 0.4, "target_cpu_s": 2.0, "meets_target": True,
                            "visible_cpu_s": 0.3, "visible_meets_target": True},
                   "10.2": {"cpu_s": 2.5, "target_cpu_s": 2.0, "meets_target": False,
                            "visible_cpu_s": 1.25, "visible_meets_target": False}},
        "modules": {"config": {"source": "tiny"},
                    "multi_head_attention": {"ours_s": 2e-3, "torch_s": 1e-3, "ratio": 2.0,
                                             "target_ratio": 1.5}},
        "scaling": scaling.bench_scaling(lengths=(8, 16), repeats=1, fit_from=8, log=lambda _: None),
        "decoding": {"config": {"source": "tiny", "output_tokens": 64},
                     "batch_64": {"batch": 64, "output_tokens": 64, "uncached_s": 0.3, "cached_s": 0.05,
                                  "ratio": 6.0, "target_ratio": 3.0, "same_ids": True}},
    }
    json_path, md_path = report.write(result, tmp_path)
    data = json.loads(json_path.read_text())
    assert data["notebooks"]["10.1"]["seconds"] == 1.0
    assert data["autograde"]["speedup"] == 2.0
    assert data["modules"]["multi_head_attention"]["ratio"] == 2.0
    assert math.isfinite(data["scaling"]["course"]["exponent"])
    assert {"cpu", "cores", "torch", "date", "device", "load_average_start"} <= set(data["machine"])
    text = md_path.read_text()
    assert data["decoding"]["batch_64"]["ratio"] == 6.0
    for heading in ("| notebook |", "| stock nbgrader", "| multi_head_attention |",
                    "| **fitted exponent**", "| CPU seconds by phase | nbgrader | kernels | autograde |",
                    "| hidden checks, CPU seconds (target < 2) | 0.40 | 2.50 **over** |",
                    "| visible tests, CPU seconds once warm (target < 1) | 0.30 | 1.25 **over** |",
                    "| batch (cpu) |"):
        assert heading in text
    assert "| ours, --jobs 2 |  |  | 7.5 | 0.3 | 0.8 | 0.2 | 8.8 |" in text
    assert "| 2.00 | >= 95 % of the ceiling |" in text
    assert "| 1 thread(s) per kernel | 12.0 | 5.2 | 2.30 | 11 / 12 | 87 % | >= 95 % | **no** |" in text
    assert "2.50 **over**" in text and "0.12 s of wall time and 0.05 s of CPU per notebook" in text
    assert machine["cpu"] in text
    assert report.KEPT not in text  # a first run has no part kept by hand
    md_path.write_text(text + "\n" + report.KEPT + "\n\nrun of 02:43: 1.88x\n")
    result["autograde"]["speedup"] = 3.0
    report.write(result, tmp_path)
    again = md_path.read_text()
    assert again.startswith("# Benchmarks") and again.count(report.KEPT) == 1
    assert again.endswith(report.KEPT + "\n\nrun of 02:43: 1.88x\n") and "| 3.00 |" in again


def test_command_line_defaults_measure_every_part():
    """Does a bare ``python -m bench`` measure every part?"""
    args = build_parser().parse_args([])
    assert args.only == ["modules", "decoding", "scaling", "notebooks", "checks", "autograde", "host"]
    assert args.class_sizes == [50, 500, 5000]
    assert args.jobs == 2


def test_decoding_ratio_is_uncached_over_cached():
    """Does the decoding part time both decoders on the same batch, check they agree, and
    compute its ratio from the measured medians?"""
    from bench import decoding

    entry = decoding.bench_decoding(output_tokens=4, batches=(1, 3), repeats=2, round_s=1e-3, cfg=TINY,
                                    log=lambda _: None)
    for batch in (1, 3):
        e = entry[f"batch_{batch}"]
        assert e["batch"] == batch and e["output_tokens"] == 4 and e["same_ids"] is True
        assert e["ratio"] == e["uncached_s"] / e["cached_s"]
        assert e["uncached_s"] == statistics.median(e["uncached_samples_s"])
    text = "\n".join(report.decoding_table(entry))
    assert "| 3 | 4 |" in text and "greedy_decode_cached" in text


def test_share_of_the_ceiling_is_our_speedup_over_the_machines():
    """Is our speedup judged against the machine's ceiling, at the target share?"""
    from bench.autograde import TARGET_SHARE, against_ceiling

    assert against_ceiling(1.9, {"speedup": 2.0}) == {"share_of_ceiling": 0.95, "meets_target": True}
    assert against_ceiling(1.5, {"speedup": 2.0}) == {"share_of_ceiling": 0.75, "meets_target": False}
    assert against_ceiling(None, {"speedup": 2.0})["meets_target"] is None
    assert TARGET_SHARE == 0.95


@pytest.mark.slow
def test_machine_ceiling_runs_the_streams_both_ways(tmp_path):
    """Does the ceiling time the same notebooks one stream after another and at once, with
    their CPU seconds, its speedup the ratio of the two?"""
    from bench.autograde import machine_ceiling

    path = tmp_path / "busy.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass")]), path)
    c = machine_ceiling([path], streams=2, threads=1)
    assert c["streams"] == 2 and c["notebooks"] == 1
    assert c["speedup"] == round(c["serial_s"] / c["parallel_s"], 2)
    assert c["serial_cpu_s"] >= 1.0 and c["parallel_cpu_s"] >= 1.0  # two busy kernels each way
    assert c["serial_s"] >= 1.0  # one after another: at least both kernels' busy time


@pytest.mark.slow
def test_benchmark_against_stock_nbgrader(tmp_path):
    """Does the benchmark time stock nbgrader and ours on the same notebooks, agreeing on
    the scores?"""
    root = tmp_path / "class"
    nb = samples.solved("10.1-self-attention")
    samples.write(nb, root, "a", "10.1-self-attention")
    samples.write(samples.plant(nb, "qkv_projections", "qkv_projections = None"), root, "b",
                  "10.1-self-attention")
    from bench.autograde import benchmark_against_nbgrader

    numbers = benchmark_against_nbgrader(root, jobs=2, timeout=120)
    assert {"autograde.serial_nbgrader_s", "autograde.parallel_s", "autograde.jobs",
            "autograde.speedup"} <= set(numbers)
    assert numbers["autograde.notebooks"] == 2 and numbers["autograde.jobs"] == 2
    assert numbers["autograde.score_differences"] == []
    print(numbers)


@pytest.mark.slow
def test_the_host_part_measures_each_class(tmp_path):
    """Does the host part grade every submission of each synthetic class through the real host
    side (one result and one row each), and report CPU and memory as measured, per size?"""
    from bench.host_scale import bench_host

    found = bench_host((20, 40), work=tmp_path, log=lambda text: None)
    assert set(found["sizes"]) == {"20", "40"}
    for size, r in found["sizes"].items():
        assert r["graded"] == r["rows"] == int(size)
        assert r["host_cpu_s"] > 0 and r["peak_mb"] >= r["baseline_mb"] > 0
        assert r["workers_cpu_s"] >= int(size) * found["stand_in_cpu_s"]  # the stand-in ran
        assert math.isclose(r["host_cpu_ms_per_submission"], 1000 * r["host_cpu_s"] / int(size),
                            rel_tol=0.01, abs_tol=0.01)
    small, large = found["sizes"]["20"], found["sizes"]["40"]
    assert math.isclose(found["cpu_ratio_largest_to_smallest"],
                        large["host_cpu_ms_per_submission"] / small["host_cpu_ms_per_submission"],
                        rel_tol=0.02)
    assert "ms of host" in "\n".join(report.host_table(found))


@pytest.mark.slow  # a fresh Python importing torch
def test_a_fresh_process_measures_its_own_peak_memory():
    """Does the host part's peak memory leave out the memory of the process that started it
    (``ru_maxrss`` of a started process counts its parent's memory at the fork)?"""
    import subprocess
    import sys

    held = bytearray(600 * 2**20)
    held[::4096] = b"\1" * len(held[::4096])  # resident, not only reserved
    code = "from bench.host_scale import peak_mb; print(peak_mb())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=samples.ROOT, check=True)
    assert float(child.stdout) < 400, child.stdout
    del held


def test_a_part_measured_after_the_run_says_when():
    """Does a table re-measured by ``--only`` after the run say when and at what load (and its note),
    while a part measured within the run says nothing more?"""
    machine = {"date": "2026-12-01T17:15:00+00:00", "bench_seconds": 400.0,
               "parts": {"checks": {"date": "2026-12-01T17:18:00+00:00"},
                         "notebooks": {"date": "2026-12-01T18:00:00+00:00", "note": "Alone.",
                                       "load_average_start": [0.5, 0.6, 0.7],
                                       "load_average_end": [0.8, 0.9, 1.0]}}}
    result = {"machine": machine}
    assert report.measured_apart(result, "checks") == []
    line = report.measured_apart(result, "notebooks")[0]
    assert "`python -m bench --only notebooks` at 2026-12-01T18:00:00+00:00" in line
    assert "0.5/0.6/0.7 at the start, 0.8/0.9/1.0 at the end" in line and line.endswith("Alone.")
