"""The grader's note at the top of a feedback page: what it did beyond running the tests."""

from __future__ import annotations

import html

from grader.results import FLAGGED, Result, number

NOTE_STYLE = ("margin:1em 0;padding:.8em 1em;border:2px solid {color};border-radius:6px;"
              "background:{background};font-family:sans-serif")


def note_html(result: Result) -> str:
    """A box for the top of a feedback page: what the grader did beyond running the tests."""
    late = [result.lateness] if result.lateness else []  # a field, not a note: no reason
    lines = [*(f"Integrity: {flag}" for flag in result.flags), *late, *result.notes]
    if not lines:
        return ""
    flagged = result.status == FLAGGED
    color, background = ("#b00020", "#fdecea") if flagged else ("#8a6d00", "#fff8e1")
    title = ("This submission was flagged for review; the exercises named below earned no "
             "credit." if flagged else "Notes from the grader")
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    style = NOTE_STYLE.format(color=color, background=background)
    return (f'<div class="course-grader-note" style="{style}">'
            f"<strong>{html.escape(title)}</strong><ul>{items}</ul>"
            f"<p>Score after these checks: {number(result.score)} / "
            f"{number(result.max_score)}.</p></div>")


def add_note(page: str, note: str) -> str:
    """Insert ``note`` at the start of the page body (or prepend it)."""
    if not note:
        return page
    marker = page.find("<body")
    if marker >= 0:
        end = page.find(">", marker) + 1
        return page[:end] + note + page[end:]
    return note + page
