"""The table of what the visible tests (the test cells' code before the hidden block) and the
hidden checks catch, over every right answer and planted bug declared in ``tests/answers/``.

A bug that only grading can see is declared with why: a tensor created on a fixed device (found
by running on another device). A call to the reference fails both sides, in the same words.

``python -m tests.catalogue`` prints the table.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import time

import torch

from samples import load_solution_namespace, run_visible_test
from tests.answers import Entry, assignment_of, declared, declared_sections


def outcome(run) -> BaseException | None:
    """None when ``run()`` passes, else what it raised (AssertionError or any error)."""
    try:
        run()
    except Exception as error:  # noqa: BLE001 - a learner-like implementation may raise anything
        return error
    return None


def message(failure: BaseException | None) -> str | None:
    return None if failure is None else f"{type(failure).__name__}: {failure}"


#: What each side said of each entry, once per process: the tests of tests/test_answers.py and
#: tests/test_visible.py read the same run ("hidden" or "visible", section, exercise, label).
_SAID: dict[tuple[str, str, str, str], BaseException | None] = {}


def _said(side: str, entry: Entry, run) -> BaseException | None:
    key = (side, entry.section, entry.exercise, entry.label)
    if key not in _SAID:
        failure = outcome(run)
        _SAID[key] = None if failure is None else failure.with_traceback(None)  # frames hold tensors
    return _SAID[key]


def run_visible(entry: Entry) -> BaseException | None:
    """What the visible test says of the entry (None: it passes), run once per process."""
    return _said("visible", entry, lambda: run_visible_test(entry.assignment, entry.exercise, entry.impl))


def run_hidden(entry: Entry) -> BaseException | None:
    """What the hidden check says of the entry (None: it passes), run once per process."""
    module = importlib.import_module(f"grader.checks.s{entry.section.replace('.', '_')}")
    return _said("hidden", entry, lambda: getattr(module, f"check_{entry.exercise}")(entry.impl))


GENERIC = re.compile(r".* differs from .*: (the largest difference is .*|\d+ entries are inf or NaN)\.")


def names_the_mistake(failure: BaseException | None) -> bool:
    """Does a failure name a known mistake, or say more than "X differs from Y in case Z: the
    largest difference is ... at index ..." (what to fix, which property breaks)?"""
    if failure is None:
        return False
    if getattr(failure, "mistake", None) is not None:
        return True
    lines = [line for line in str(failure).strip().splitlines() if line.strip()]
    return not (len(lines) == 1 and GENERIC.fullmatch(lines[0]))


# ---------------------------------------------------------------- the catalogue


@functools.cache
def build() -> tuple[Entry, ...]:
    """Every declared right answer and planted bug, in course order (built once per process)."""
    return tuple(e for section in declared_sections()
                 for e in declared(section, load_solution_namespace(assignment_of(section))))


def entry_id(entry: Entry) -> str:
    return f"{entry.exercise}: {entry.label}"


def params(entries) -> list:
    """The entries as pytest parameters, those of a section in one xdist group: under
    ``--dist loadgroup`` one worker runs a section's tests of both sides, each run once
    (``run_visible``, ``run_hidden``)."""
    import pytest

    return [pytest.param(e, id=entry_id(e), marks=pytest.mark.xdist_group(f"answers-{e.section}"))
            for e in entries]


# ---------------------------------------------------------------- the table


def table(entries: list[Entry]) -> tuple[str, dict]:
    """Run every planted bug through both sides; the markdown table and the totals."""
    rows, totals = [], {"planted": 0, "hidden": 0, "visible": 0, "visible of hidden": 0, "named": 0,
                        "grading only": 0, "missed": []}
    exercises = list(dict.fromkeys((e.section, e.exercise) for e in entries))
    header = ("| section | exercise | planted bugs | hidden catch | visible catch | visible names the "
              "mistake | only grading can see (why) |\n|---|---|---:|---:|---:|---:|---|")
    for section, exercise in exercises:
        bugs = [e for e in entries if (e.section, e.exercise) == (section, exercise) and not e.correct]
        counts = {"hidden": 0, "visible": 0, "named": 0}
        only = [f"{e.label} ({e.grading_only})" for e in bugs if e.grading_only]
        for e in bugs:
            if e.grading_only:
                continue
            hidden, visible = run_hidden(e), run_visible(e)
            counts["hidden"] += hidden is not None
            counts["visible"] += visible is not None
            counts["named"] += names_the_mistake(visible)
            totals["visible of hidden"] += hidden is not None and visible is not None
            if hidden is not None and visible is None:
                totals["missed"].append(f"{section} {exercise}: {e.label}")
        considered = len(bugs) - len(only)
        rows.append(f"| {section} | `{exercise}` | {considered} | {counts['hidden']} | {counts['visible']} | "
                    f"{counts['named']} | {'; '.join(only)} |")
        totals["planted"] += considered
        totals["grading only"] += len(only)
        for key in ("hidden", "visible", "named"):
            totals[key] += counts[key]
    rows.append(f"| **all** | | **{totals['planted']}** | **{totals['hidden']}** | **{totals['visible']}** | "
                f"**{totals['named']}** | {totals['grading only']} more |")
    return header + "\n" + "\n".join(rows), totals


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    torch.set_num_threads(1)
    started = time.perf_counter()
    entries = build()
    text, totals = table(entries)
    print(text)
    ratio = totals["visible of hidden"] / max(1, totals["hidden"])
    print(f"\nVisible tests catch {totals['visible of hidden']} of the {totals['hidden']} bugs the hidden "
          f"checks catch ({ratio:.1%}); they name the mistake for {totals['named']} of {totals['visible']}.")
    if totals["missed"]:
        print("Caught only by the hidden checks: " + "; ".join(totals["missed"]))
    right = [e for e in entries if e.correct]
    rejected = [f"{e.section} {e.exercise} {e.label}" for e in right
                if run_visible(e) is not None or run_hidden(e) is not None]
    print(f"{len(right)} right answers: {len(right) - len(rejected)} pass both sides"
          + (f"; rejected: {rejected}" if rejected else "."))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ratio >= 0.95 and not rejected else 1


if __name__ == "__main__":
    sys.exit(main())

