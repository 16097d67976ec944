"""The report's figures, drawn with matplotlib and embedded as base64 PNG (``data:`` URLs).

Drawn on :class:`matplotlib.figure.Figure` objects of their own (no pyplot, no global
state) and saved without metadata, so the same counts give the same bytes.
"""

from __future__ import annotations

import base64
import io
import math

from matplotlib.figure import Figure

from grader.report.summary import FULL, NOT_ATTEMPTED, PARTIAL, ZERO, ExerciseSummary, Timing

COLORS = {FULL: "#3a8d4f", PARTIAL: "#e0a030", ZERO: "#c8463c", NOT_ATTEMPTED: "#b0b0b0"}


def data_url(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def score_histogram(scores: list[float], max_score: float) -> str:
    """Submissions per score: one bar per point up to 20 points (centred on it), wider
    bins past that, the last one holding full marks."""
    if max_score <= 20:
        edges = [i - 0.5 for i in range(math.floor(max_score) + 2)]
    else:
        width = math.ceil(max_score / 20)
        edges = [i * width for i in range(math.ceil(max_score / width) + 1)]
    figure = Figure(figsize=(6, 2.6))
    ax = figure.subplots()
    ax.hist(scores, bins=edges, color="#4a78b5", edgecolor="white")
    ax.set_xlabel(f"score (of {max_score:g})")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("submissions")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return data_url(figure)


def shares_chart(exercises: list[ExerciseSummary]) -> str:
    """One bar per exercise: the shares of full marks, partial, zero and not attempted."""
    figure = Figure(figsize=(6, 0.5 + 0.45 * len(exercises)))
    ax = figure.subplots()
    names = [e.name for e in exercises][::-1]
    left = [0.0] * len(names)
    for share, color in COLORS.items():
        widths = [len(e.shares[share]) / max(1, e.graded) for e in exercises][::-1]
        ax.barh(names, widths, left=left, color=color, label=share, height=0.6)
        left = [a + b for a, b in zip(left, widths)]
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(lambda x, _: f"{x:.0%}")
    ax.legend(ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return data_url(figure)


def time_histogram(timings: list[Timing]) -> str:
    """Seconds per graded notebook, one colour per assignment."""
    figure = Figure(figsize=(6, 2.6))
    ax = figure.subplots()
    longest = max(max(t.seconds) for t in timings)
    bins = [longest * i / 20 for i in range(21)] if longest > 0 else [0, 1]
    ax.hist([t.seconds for t in timings], bins=bins, stacked=True, label=[t.assignment for t in timings])
    ax.set_xlabel("seconds per notebook")
    ax.set_ylabel("notebooks")
    ax.yaxis.get_major_locator().set_params(integer=True)
    if len(timings) > 1:
        ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return data_url(figure)
