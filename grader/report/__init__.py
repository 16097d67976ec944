"""The class report: ``python -m grader report OUT``, and written by every autograde run and
every merge, as ``OUT/report.html`` (one self-contained page) and ``OUT/report.csv``.

From the results alone (``OUT/results``): per assignment the score distribution and how
many rows are ok, flagged, in error or late; per exercise the shares of full marks,
partial, zero and not attempted, and the mistakes the checks named, most frequent first,
with the submissions that made each; the rows to review by hand; grading time per
notebook. :mod:`grader.report.summary` counts, :mod:`grader.report.page` draws.
"""

from __future__ import annotations

import json
from pathlib import Path

from grader.results import Result, atomic_write, load_results, run_keys


def write_report(out: Path, results: list[Result], exercises: list[str] | None = None) -> Path:
    """Write ``out/report.html`` and ``out/report.csv`` for ``results``; returns the page's path.

    ``exercises`` orders each assignment's exercises (grades.csv's columns)."""
    from grader.autograde.host.out_folder import read_not_graded
    from grader.report.page import page
    from grader.report.summary import csv_text, summarize, timings, to_review

    summaries = summarize(results, exercises)
    atomic_write(out / "report.csv", csv_text(summaries))
    path = out / "report.html"
    atomic_write(path, page(summaries, to_review(results), timings(results), results, read_not_graded(out)))
    return path


def report_out(out: Path) -> Path:
    """The report of an autograde (or merge) output folder: the rows of its batch, as its
    manifest lists them (every result there, if it has none)."""
    results = load_results(out)
    manifest_path = out / "manifest.json"
    exercises = None
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        keys = run_keys(manifest) if manifest.get("keys") else []
        exercises = manifest.get("exercises")
        if keys:
            results = {k: results[k] for k in keys if k in results}
    return write_report(out, list(results.values()), exercises)
