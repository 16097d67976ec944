"""Where you stand: what each exercise's visible check said, and the points it predicts.

Every test cell of the course opens with ``\"\"\"Check <exercise> ...``. In Jupyter (and
Colab, and IPython in a terminal) :func:`install` registers a hook that notes, after each
such cell runs, whether it passed, failed (with the message, which names the likely
mistake) or met an unfinished exercise. :func:`where_you_stand` prints the summary that
closes every notebook. Outside IPython, :func:`observe` records a cell by hand.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

#: Where the course's notebooks are when the helpers come from a checkout (Binder, Colab, make lab).
COURSE_DIR = Path(__file__).resolve().parent.parent
GRADING_ONLY = (
    "Grading checks more than the test cells do: more cases (shapes, masks, options, float64 "
    "and float32), the gradients of every parameter, your code on another device (the GPU, "
    "when there is one), and that the work is your own (no call to the PyTorch function an "
    "exercise is graded against, nothing changed in the checks). The test cells catch the "
    "usual mistakes; a pass is a strong sign, not a guarantee."
)
#: The grade ids of test cells: ``check_<exercise>``, and ``predict_<name>`` for a prediction.
GRADE_ID_PREFIXES = ("check_", "predict_")
CHECK_CELL = re.compile(r'\s*(?:[rRuU]?"""|[rRuU]?\'\'\')\s*Check\s+(\w+)')


@dataclass
class Outcome:
    """The last run of one exercise's test cell."""

    status: str  # "passed", "failed" or "not attempted"
    message: str = ""


_outcomes: dict[str, Outcome] = {}


# ---------------------------------------------------------------- the notebook's own metadata


def _stands(cell: dict, section: str) -> bool:
    return f'course.progress.where_you_stand("{section}")' in "".join(cell.get("source", ""))


def notebook_of(section: str) -> dict:
    """The notebook of ``section`` as JSON: the one in the working folder (Jupyter runs a kernel
    in its notebook's folder) with a cell ``where_you_stand("<section>")``, else the course's
    copy in ``notebooks/`` (or ``solutions/``) beside the helpers; LookupError if none."""
    candidates = [*sorted(Path.cwd().glob("*.ipynb")),
                  *sorted(COURSE_DIR.glob(f"notebooks/{section}-*/*.ipynb")),
                  *sorted(COURSE_DIR.glob(f"solutions/{section}-*/*.ipynb"))]
    for path in candidates:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if any(_stands(cell, section) for cell in nb.get("cells", [])):
            return nb
    raise LookupError(f"no notebook of {section} was found (looked in {Path.cwd()} and "
                      f"{COURSE_DIR / 'notebooks'}).")


@functools.cache
def exercises(section: str) -> dict[str, float]:
    """The graded exercises of ``section`` in notebook order, with their points: read from the
    nbgrader metadata of its test cells (grade id ``check_<exercise>`` or ``predict_<name>``), the
    one place they live."""
    found = {}
    for cell in notebook_of(section)["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        name = exercise_of_grade_id(str(meta.get("grade_id", "")))
        if meta.get("grade") and name is not None:
            points = meta.get("points", 0)
            found[name] = int(points) if float(points).is_integer() else points
    return found


def exercise_of_grade_id(grade_id: str) -> str | None:
    """``check_softmax`` -> ``softmax``, ``predict_qk_variance`` -> ``qk_variance``; None for another id."""
    for prefix in GRADE_ID_PREFIXES:
        if grade_id.startswith(prefix):
            return grade_id[len(prefix):]
    return None


@functools.cache
def title(section: str) -> str:
    """The notebook's title without its number: its first heading, "# 10.4 Positional encoding"."""
    for cell in notebook_of(section)["cells"]:
        if cell.get("cell_type") == "markdown":
            match = re.match(rf"#\s+{re.escape(section)}\s+(.+)", "".join(cell.get("source", "")).strip())
            if match:
                return match.group(1).strip()
    return ""


def exercise_of(cell_source: str) -> str | None:
    """The exercise a test cell checks (from its opening docstring), or None."""
    match = CHECK_CELL.match(cell_source)
    return match.group(1) if match else None


def observe(cell_source: str, error: BaseException | None) -> None:
    """Record the outcome of a cell that ran (nothing happens for cells that are not checks)."""
    name = exercise_of(cell_source)
    if name is None:
        return
    if error is None:
        _outcomes[name] = Outcome("passed")
    elif _undefined_name(error) == name:  # the test cell ran before the answer cell
        _outcomes[name] = Outcome("not attempted", f"the cell that defines {name} has not run yet: "
                                                   "run it, then this test cell")
    elif isinstance(error, NotImplementedError) or type(error).__name__ == "NotAttempted":
        _outcomes[name] = Outcome("not attempted", "it (or an exercise it uses) raises NotImplementedError")
    else:
        text = str(error).strip() or type(error).__name__
        if type(error).__name__ not in ("AssertionError", "CheckFailure"):
            text = f"{type(error).__name__}: {text}"
        _outcomes[name] = Outcome("failed", text)


def _undefined_name(error: BaseException) -> str | None:
    """The name a NameError says is not defined, or None."""
    if not isinstance(error, NameError):
        return None
    match = re.fullmatch(r"name '(\w+)' is not defined", str(error))
    return getattr(error, "name", None) or (match.group(1) if match else None)


def outcomes() -> dict[str, Outcome]:
    """What has been recorded so far, by exercise."""
    return dict(_outcomes)


def forget() -> None:
    """Forget every recorded outcome."""
    _outcomes.clear()


def _after_cell(result) -> None:
    """IPython's post_run_cell hook: note the outcome of a test cell."""
    info = getattr(result, "info", None)
    source = getattr(info, "raw_cell", None)
    if source:
        observe(source, result.error_before_exec or result.error_in_exec)


def install() -> bool:
    """Watch test cells in the running IPython (Jupyter, Colab); False outside IPython."""
    ipython = sys.modules.get("IPython")  # imported already in any IPython kernel or shell
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    if not any(getattr(f, "__name__", "") == "_after_cell" for f in shell.events.callbacks["post_run_cell"]):
        shell.events.register("post_run_cell", _after_cell)
    return True


def report(section: str, width: int = 88) -> str:
    """The "where you stand" table of ``section`` as plain text."""
    try:
        points = exercises(section)
    except LookupError as error:
        return f"Where you stand in {section}: its points are read from its notebook, but {error}"
    name_width = max(len(n) for n in points) + 2
    indent = " " * (name_width + 9)
    lines = [f"Where you stand in {section} {title(section)}", "",
             f"{'exercise':<{name_width}} points  visible check", "-" * width]
    earned = 0
    for name, worth in points.items():
        outcome = _outcomes.get(name, Outcome("not attempted", "its test cell has not run yet"))
        got = worth if outcome.status == "passed" else 0
        earned += got
        head = f"{name:<{name_width}}{got:>3} / {worth:<2} {outcome.status}"
        lines.append(head + (":" if outcome.message else ""))
        for paragraph in outcome.message.splitlines()[:6]:
            lines += textwrap.wrap(paragraph, width, initial_indent=indent, subsequent_indent=indent,
                                   break_long_words=False, break_on_hyphens=False)
    total = sum(points.values())
    lines += ["-" * width,
              f"{'expected total':<{name_width}}{earned:>3} / {total:<2}  if grading agrees with "
              "the visible checks", ""]
    lines += textwrap.wrap(GRADING_ONLY, width, break_long_words=False)
    return "\n".join(lines)


def where_you_stand(section: str) -> None:
    """Print, for every exercise of ``section``: points, passed / failed / not attempted."""
    print(report(section))
