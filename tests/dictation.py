"""How much of each exercise's answer the learner's notebook dictates, and whether a message does.

An exercise's *answer lines* are the computing lines of its solution (between ``### BEGIN
SOLUTION`` and ``### END SOLUTION``): comments dropped, whitespace removed, lines shorter than
:data:`SHORTEST` characters left out (``return x``, ``super().__init__()``). A line is
*dictated* when it stands verbatim in the learner notebook's markdown outside the
``<details>`` folds (the hints may say more). The course's rule: at most :data:`MAX_SHARE` of an
exercise's answer lines are dictated, and no check's message holds one.

``python -m tests.dictation [SECTION ...]`` prints the share per exercise and the lines dictated.
"""

from __future__ import annotations

import functools
import re
import sys

import nbformat

from grader.results import exercise_name
from samples import notebook_path
from tests.answers import assignment_of, declared_sections

SHORTEST = 12
MAX_SHARE = 0.2
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
_FOLD = re.compile(r"<details>.*?</details>", re.S | re.I)
_COMMENT = re.compile(r"\s+#.*$|^\s*#.*$")


def squeeze(text: str) -> str:
    """``text`` without any whitespace: how lines are compared."""
    return re.sub(r"\s+", "", text)


@functools.cache
def answer_lines(section: str) -> dict[str, list[str]]:
    """Each exercise's answer lines (squeezed), by exercise name, in notebook order."""
    nb = nbformat.read(notebook_path(assignment_of(section)), as_version=4)
    graded = {exercise_name(c.metadata["nbgrader"]["grade_id"]) for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    found = {}
    for cell in nb.cells:
        name = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or name not in graded:
            continue
        lines = [squeeze(_COMMENT.sub("", line)) for block in _SOLUTION.findall(cell.source)
                 for line in block.splitlines()]
        found[name] = [line for line in lines if len(line) >= SHORTEST]
    return found


def learner_prose(section: str) -> str:
    """The learner notebook's markdown outside the ``<details>`` folds, squeezed."""
    nb = nbformat.read(notebook_path(assignment_of(section), folder="notebooks"), as_version=4)
    return squeeze("\n".join(_FOLD.sub("", c.source) for c in nb.cells if c.cell_type == "markdown"))


def dictated(section: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each exercise's (answer lines, those of them dictated by the prose)."""
    prose = learner_prose(section)
    return {name: (lines, [line for line in lines if line in prose])
            for name, lines in answer_lines(section).items()}


def answer_line_in(message: str, section: str, exercise: str) -> str | None:
    """The first answer line of ``exercise`` that ``message`` holds, or None."""
    text = squeeze(message)
    return next((line for line in answer_lines(section).get(exercise, []) if line in text), None)


def main(sections: list[str]) -> int:
    worst = 0.0
    for section in sections or list(declared_sections()):
        for name, (lines, said) in dictated(section).items():
            share = len(said) / len(lines) if lines else 0.0
            worst = max(worst, share)
            flag = "  <- over" if share > MAX_SHARE else ""
            print(f"{section} {name}: {len(said)} of {len(lines)} answer lines dictated ({share:.0%}){flag}")
            for line in said:
                print(f"    {line}")
    return 1 if worst > MAX_SHARE else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
