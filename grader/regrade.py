"""Regrade named students: ``python -m grader regrade SUBMISSIONS --out OUT --student ID``.

After a fixed file or an accepted appeal: the named students' submissions are graded again
(whatever their content hash says), every other row of OUT stays exactly as it was, and
what the named students had before (their results, feedback pages, graded notebooks and
the whole earlier grades.csv) is kept in ``OUT/previous/<UTC time>/``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from grader.autograde.host.options import Options, Summary
from grader.errors import UsageError
from grader.results import load_results, number

PARTS = ("results", "feedback", "autograded")


@dataclass
class Regrade:
    """What a regrade did: the run's summary, where the earlier state went, what changed."""

    summary: Summary
    kept: Path
    changes: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join([self.summary.text(), f"what they had before: {self.kept}", *self.changes])


def run_options(out: Path) -> Options:
    """The options of the earlier run in ``out`` (its manifest), so a regrade grades as it did."""
    import dataclasses
    import json

    path = out / "manifest.json"
    if not path.is_file():
        raise UsageError(f"{out} is not the --out folder of an autograde run: grade the class first.")
    saved = json.loads(path.read_text()).get("options", {})
    names = {f.name for f in dataclasses.fields(Options)} - {"jobs", "shard", "students", "force"}
    options = Options(**{k: v for k, v in saved.items() if k in names})
    return options


def keep_previous(out: Path, students: list[str]) -> Path:
    """Copy the named students' results, pages and graded notebooks, and grades.csv, aside."""
    kept = out / "previous" / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    for part in PARTS:
        for student in students:
            if (out / part / student).is_dir():
                shutil.copytree(out / part / student, kept / part / student)
    if (out / "grades.csv").is_file():
        kept.mkdir(parents=True, exist_ok=True)
        shutil.copy2(out / "grades.csv", kept / "grades.csv")
    return kept


def regrade(submissions: Path, out: Path, students: list[str], options: Options | None = None) -> Regrade:
    """Grade ``students`` again into ``out`` (an earlier autograde run of the same class)."""
    from grader.autograde.host.run import autograde

    if not students:
        raise UsageError("Name the students to regrade: --student ID (repeatable).")
    out = out.resolve()
    if not (out / "manifest.json").is_file():
        raise UsageError(f"{out} is not the --out folder of an autograde run: grade the class first.")
    options = options or Options()
    options.students = list(students)
    before = load_results(out)
    unknown = sorted(set(students) - {s for s, _ in before})
    if unknown:
        raise UsageError(f"{out} has no result for {', '.join(unknown)}: check the names "
                         "(the students' folder names), or grade them with autograde.")
    kept = keep_previous(out, students)
    summary = autograde(submissions, out, options)
    after = load_results(out)
    changes = []
    for key in sorted(k for k in after if k[0] in students):
        old, new = before.get(key), after[key]
        was = f"{number(old.final_score)} ({old.status})" if old else "no result"
        changes.append(f"{key[0]}/{key[1]}: {was} -> {number(new.final_score)} ({new.status})")
    return Regrade(summary, kept, changes)
