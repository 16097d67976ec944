"""The report as one self-contained HTML page: inline style, figures as ``data:`` URLs, no
script and nothing fetched, so it opens from disk (``file://``) or as a mail attachment.

Student ids, reasons and mistake descriptions come from submissions: all of it is escaped.
The page has no date and no paths of its own: the same results give the same page, but
for the grading-time section (``<section id="time">``), which differs from run to run.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from grader.report.figures import score_histogram, shares_chart, time_histogram
from grader.report.summary import (
    DID_NOT_RUN,
    SHARES,
    UNNAMED,
    AssignmentSummary,
    ExerciseSummary,
    Timing,
)
from grader.results import ERROR, FLAGGED, OK, Result, number, short

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 70rem; margin: 1.5rem auto; padding: 0 1rem;
       color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #ddd; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: 0.6rem 0 1rem; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.25rem 0.6rem; text-align: left;
         vertical-align: top; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.flagged { color: #9a3c00; font-weight: 600; } .error { color: #b00020; font-weight: 600; }
.reason { max-width: 42rem; } .muted { color: #777; } code { font-size: 90%; }
details summary { cursor: pointer; color: #345; } img { max-width: 100%; }
.figures { display: flex; flex-wrap: wrap; gap: 1rem; align-items: flex-start; }
"""


def cell(value, numeric: bool = False, cls: str = "") -> str:
    classes = " ".join(c for c in ("n" if numeric else "", cls) if c)
    return f"<td class=\"{classes}\">{value}</td>" if classes else f"<td>{value}</td>"


def table(head: list[str], rows: list[str]) -> str:
    return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
            + "".join(f"<tr>{r}</tr>" for r in rows) + "</table>")


def image(alt: str, url: str) -> str:
    return f"<img alt=\"{escape(alt)}\" src=\"{url}\">"


def percent(count: int, of: int) -> str:
    return f"{count / of:.0%}" if of else "–"


def students_list(students: list[str], shown: int = 12) -> str:
    """The ids, the first few inline and all of them behind a click."""
    text = ", ".join(escape(s) for s in students[:shown])
    if len(students) <= shown:
        return text
    return (f"<details><summary>{text}, … ({len(students)})</summary>"
            f"{', '.join(escape(s) for s in students)}</details>")


def overview(s: AssignmentSummary) -> str:
    head = ["students", "submitted", "graded", OK, FLAGGED, ERROR, "late", "late penalty",
            "mean score (after penalties)"]
    mean = sum(s.scores) / len(s.scores) if s.scores else 0.0
    counts = [s.students, s.submitted, s.graded, *(len(s.status[k]) for k in (OK, FLAGGED, ERROR, "late")),
              len(s.penalised)]
    row = "".join(cell(c, numeric=True) for c in counts)
    row += cell(f"{mean:.2f} / {number(s.max_score)}" if s.scores else "–", numeric=True)
    return table(head, [row])


def exercise_rows(exercises: list[ExerciseSummary]) -> str:
    rows = []
    for e in exercises:
        shares = "".join(cell(f"{len(e.shares[k])} ({percent(len(e.shares[k]), e.graded)})", numeric=True)
                         for k in SHARES)
        rows.append(cell(f"<code>{escape(e.name)}</code>") + cell(number(e.max_points), numeric=True)
                    + shares)
    return table(["exercise", "points", *SHARES], rows)


def mistakes_block(e: ExerciseSummary) -> str:
    rows = [cell(f"<code>{escape(m.name)}</code>") + cell(escape(m.description))
            + cell(len(m.students), numeric=True) + cell(percent(len(m.students), e.graded), numeric=True)
            + cell(students_list(m.students)) for m in e.mistakes]
    if e.unnamed:
        rows.append(cell(f"<span class=\"muted\">{UNNAMED}</span>") + cell("")
                    + cell(len(e.unnamed), numeric=True)
                    + cell(percent(len(e.unnamed), e.graded), numeric=True) + cell(students_list(e.unnamed)))
    if e.did_not_run:
        rows.append(cell(f"<span class=\"muted\">{DID_NOT_RUN}</span>")
                    + cell("the test cell never ran to its end (an error before it, or in it)")
                    + cell(len(e.did_not_run), numeric=True)
                    + cell(percent(len(e.did_not_run), e.graded), numeric=True)
                    + cell(students_list(e.did_not_run)))
    failed = sum(len(m.students) for m in e.mistakes) + len(e.unnamed)
    title = (f"<h4><code>{escape(e.name)}</code>: {e.short_of_full} short of full marks "
             f"({failed} failed their checks, {len(e.did_not_run)} did not run)</h4>")
    if not rows:
        return title + "<p class=\"muted\">No submission failed its checks.</p>"
    return title + table(["mistake", "what the checks saw", "count", "share", "submissions"], rows)


def assignment_section(s: AssignmentSummary) -> str:
    figures = []
    if s.scores:
        figures.append(image(f"score histogram of {s.name}", score_histogram(s.scores, s.max_score)))
    if s.exercises:
        figures.append(image(f"exercise shares of {s.name}", shares_chart(s.exercises)))
    return (f"<section class=\"assignment\" id=\"{escape(quote(s.name))}\"><h2>{escape(s.name)}</h2>"
            + overview(s) + f"<div class=\"figures\">{''.join(figures)}</div>"
            + "<h3>Exercises</h3>" + exercise_rows(s.exercises)
            + "<h3>Mistakes, most frequent first</h3>"
            + "".join(mistakes_block(e) for e in s.exercises) + "</section>")


def feedback_link(r: Result) -> str:
    """The student id, linked to the row's feedback page (a path relative to OUT)."""
    if not r.feedback:
        return escape(r.student_id)
    return f"<a href=\"{escape(quote(r.feedback[0]))}\">{escape(r.student_id)}</a>"


def review_section(review: list[Result]) -> str:
    if not review:
        body = "<p>No submission was flagged or failed to grade.</p>"
    else:
        rows = [cell(feedback_link(r)) + cell(escape(r.assignment))
                + cell(r.status + (" (retried on rerun)" if r.retry else ""), cls=r.status)
                + cell(f"{number(r.score)} / {number(r.max_score)}", numeric=True)
                + cell(escape(short(r.reason, 600)), cls="reason") for r in review]
        body = table(["student", "assignment", "status", "score", "reason"], rows)
    return ("<section id=\"review\"><h2>To review by hand first</h2><p>Flagged rows (integrity: "
            "a grade the checks could not trust) and errors (the notebook could not be graded "
            "whole).</p>" + body + "</section>")


def kept_section(results: list[Result], not_graded: list[dict[str, str]]) -> str:
    """What the batch left out: rows kept from an earlier batch that lacked their student, and
    the files that belong to no student (``not-graded.csv``)."""
    absent = [r for r in results if r.missing_from]
    rows = [cell(feedback_link(r)) + cell(escape(r.assignment)) + cell(escape(r.missing_from))
            for r in absent]
    body = (table(["student", "assignment", "not in"], rows) if absent else
            "<p>Every row's student was in the latest batch of its assignment.</p>")
    files = [cell(escape(f["file"])) + cell(escape(f["why"]), cls="reason") + cell(escape(f["batch"]))
             for f in not_graded]
    listed = (table(["file", "why", "batch"], files) if files else
              "<p>Every file of the batches belongs to a student.</p>")
    return ("<section id=\"kept\"><h2>Not in the latest batch, kept</h2><p class=\"flagged\">"
            f"{len(absent)} row(s) of students the latest batch of their assignment did not hold: "
            "kept with their earlier grade (grades.csv's in_batch: no). Check whether they withdrew "
            "or the download missed them.</p>" + body
            + f"<h3>NOT GRADED: files that belong to no student ({len(files)}, listed in not-graded.csv)</h3>"
            + listed + "</section>")


def steps_text(timings: dict[str, float]) -> str:
    """``prepare 0.4 s, autograde 5.1 s, ...``: wall seconds of each grading step."""
    return ", ".join(f"{k} {v:.1f} s" for k, v in timings.items() if not k.endswith("_cpu"))


def time_section(timings: list[Timing], results: list[Result]) -> str:
    if not timings:
        return "<section id=\"time\"><h2>Grading time</h2><p>No notebook was graded.</p></section>"
    rows = [cell(escape(t.assignment)) + "".join(
        cell(f"{v:.1f} s", numeric=True) for v in (t.median, t.quantile(0.9), max(t.seconds), sum(t.seconds)))
        + cell(len(t.seconds), numeric=True) for t in timings]
    slow = sorted((r for r in results if r.elapsed_s > 0), key=lambda r: (-r.elapsed_s, r.key))[:10]
    steps = [cell(escape(r.student_id)) + cell(escape(r.assignment))
             + cell(f"{r.elapsed_s:.1f} s", numeric=True)
             + cell(escape(steps_text(r.timings))) for r in slow]
    return ("<section id=\"time\"><h2>Grading time</h2><p>Wall seconds per notebook, in its worker "
            "(results kept from an earlier run keep their time).</p>"
            + table(["assignment", "median", "90th percentile", "slowest", "total", "notebooks"], rows)
            + image("grading time histogram", time_histogram(timings))
            + "<h3>Slowest notebooks</h3>" + table(["student", "assignment", "seconds", "steps"], steps)
            + "</section>")


def page(summaries: list[AssignmentSummary], review: list[Result], timings: list[Timing],
         results: list[Result], not_graded: list[dict[str, str]] = ()) -> str:
    rows = sum(s.students for s in summaries)
    contents = "".join(f"<li><a href=\"#{escape(quote(s.name))}\">{escape(s.name)}</a></li>"
                       for s in summaries)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>Class report</title><style>" + STYLE + "</style></head><body>"
            f"<h1>Class report</h1><p class=\"muted\">{rows} rows ({len(summaries)} assignment(s)); "
            "the same counts are in report.csv beside this page.</p>"
            f"<ul><li><a href=\"#review\">To review by hand first ({len(review)})</a></li>"
            f"<li><a href=\"#kept\">Not in the latest batch ({sum(bool(r.missing_from) for r in results)}), "
            f"not graded ({len(not_graded)})</a></li>{contents}"
            "<li><a href=\"#time\">Grading time</a></li></ul>"
            + review_section(review) + kept_section(results, list(not_graded))
            + "".join(assignment_section(s) for s in summaries)
            + time_section(timings, results) + "</body></html>\n")
