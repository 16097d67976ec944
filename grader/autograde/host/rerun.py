"""A rerun must not change penalties by accident: an assignment graded before with a deadline
(in the same OUT, or imported into the course's gradebook) is graded again with that deadline,
or with ``--force`` (a warning then says what changes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grader import late
from grader.errors import UsageError


def gradebook_deadlines(root: Path) -> dict[str, str]:
    """The due dates (UTC, ISO) of the course gradebook's assignments, if it has one."""
    import os

    from grader.paths import CourseLayout, course_id, with_python_tools

    layout = CourseLayout(root)
    if not layout.gradebook.is_file():
        return {}
    from datetime import timezone

    from nbgrader.api import Gradebook

    os.environ.update(with_python_tools(dict(os.environ)))  # nbgrader runs alembic from PATH
    with Gradebook(layout.db_url, course_id(root)) as gb:
        return {a.name: a.duedate.replace(tzinfo=timezone.utc).isoformat()
                for a in gb.assignments if a.duedate is not None}


def earlier_settings(out: Path, graded: set[str], root: Path) -> dict[str, tuple[dict, str]]:
    """Per assignment, the late settings it was graded with before, and where that is said."""
    found: dict[str, tuple[dict, str]] = {}
    for name, due in gradebook_deadlines(root).items():
        found[name] = ({"deadline": due, "submitted_at": ""}, f"the due date in {root / 'gradebook.db'}")
    path = out / "manifest.json"
    if path.is_file():
        before = json.loads(path.read_text())
        for name in graded:
            found[name] = (late.settings(before, name), str(path))
    return found


def check_rerun(out: Path, now: dict, graded: set[str], options) -> list[str]:
    """Refuse to grade an assignment with another deadline (or none), or with --submitted-at
    added or left out, than it was graded with (``graded``: the assignments OUT has results
    of); with ``options.force``, the warnings to print instead."""
    batch = sorted({a for _, a in now["keys"]})
    before = earlier_settings(out, graded & set(batch), options.source().parent)
    changes = []
    for name in batch:
        if name not in before:
            continue
        was, where = before[name]
        new = late.settings(now, name)
        if was["deadline"] and was["deadline"] != new["deadline"] or \
                name in graded and bool(was["submitted_at"]) != bool(new["submitted_at"]):
            changes.append(f"{name} was graded with {late.describe_settings(was)} ({where}); this run "
                           f"has {late.describe_settings(new)}: its late penalties would change")
    if not changes:
        return []
    if not options.force:
        raise UsageError("; ".join(changes) + ". Give the same --deadline (and --submitted-at), or "
                         "--assignment to grade only this week's assignment, or --force to grade "
                         "again with the new settings.")
    warnings = [f"WARNING: {c} (--force)" for c in changes]
    print("\n".join(warnings), file=sys.stderr)
    return warnings
