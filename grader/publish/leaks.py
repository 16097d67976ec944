"""The release's leak check: nothing of an answer, a hidden test or ``grader/`` in what learners get.

:func:`find_leaks` reads a bundle as code (tokens: comments left out, strings whole, docstrings
skipped), so an answer line quoted in a hint string or a comment is no leak, while the same line
written as code in a shipped module or a given cell is.
"""

from __future__ import annotations

import functools
import io
import json
import re
import tokenize
from pathlib import Path

from grader.paths import section_order
from grader.publish.code import RELEASE_FILE, as_python, code_cells, code_text

INSTRUCTOR_DIRS = {"solutions", "grader", "tests", "autograded", "submitted", "feedback", "exchange"}
INSTRUCTOR_FILES = {"train_reference.py", "gradebook.db", "nbgrader_config.py"}

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
           "grader.checks", "from grader", "import grader")


SOLUTION_BLOCK = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
#: Lines of an answer this long are distinctive (a bare ``loss.backward()`` is not): a given cell
#: holding two of them, of its own section's answers or a later one's, repeats an answer.
DISTINCTIVE, REPEATED = 25, 2
_STRINGS = {tokenize.STRING} | {getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_MIDDLE",
                                                               "FSTRING_END") if hasattr(tokenize, n)}
_NOISE = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
          tokenize.COMMENT}

# Lines are compared as code: the tokens of a line, comments left out, strings whole. A line of code
# quoted in a hint string, a comment or a docstring is no line of code.


def code_lines(source: str) -> dict[int, str]:
    """Row (1-based) -> the code of that row of a module or code cell, its comment cut off; only rows
    where code starts (not inside a string), docstrings and other bare string statements left out."""
    lines, rows, comments, statement = as_python(source).splitlines(), {}, {}, []

    def flush():
        if any(t.type not in _STRINGS for t in statement):  # a bare string statement is no code
            for t in statement:
                rows.setdefault(t.start[0], t.start[1])
        statement.clear()

    try:
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok.start[1]
            if tok.type == tokenize.NEWLINE:
                flush()
            elif tok.type not in _NOISE:
                statement.append(tok)
    except (tokenize.TokenError, SyntaxError):  # an unfinished cell: the code read so far
        pass
    flush()
    return {row: lines[row - 1][col: comments.get(row)].strip() for row, col in sorted(rows.items())}


@functools.cache
def line_key(line: str) -> str:
    """How a line of code is compared: its tokens joined by one space (comments left out)."""
    words = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type not in _NOISE:
                words.append(tok.string)
    except (tokenize.TokenError, SyntaxError):  # an open bracket or string: the tokens before it
        pass
    return " ".join(words)


def code_keys(source: str) -> set[str]:
    """The :func:`line_key` of every line of code of ``source``."""
    return {line_key(line) for line in code_lines(source).values()}


def lines_in(lines, keys: set[str]) -> list[str]:
    """Those of ``lines`` (sorted) that stand as code where ``keys`` (:func:`code_keys`) come from."""
    return [line for line in sorted(lines) if line_key(line) in keys]


def split_solutions(source: str) -> tuple[list[str], list[str]]:
    """(lines of code inside the solution blocks of a code cell, lines of code outside them)."""
    inside, in_block = set(), False
    for row, line in enumerate(source.splitlines(), 1):
        if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            in_block = "BEGIN" in line
        elif in_block:
            inside.add(row)
    code = code_lines(source)
    return ([line for row, line in code.items() if row in inside],
            [line for row, line in code.items() if row not in inside])


def solution_lines(notebook: Path, min_length: int = 12) -> set[str]:
    """Non-trivial lines of code that only the solutions of an instructor notebook hold.

    Lines that also stand outside the solution blocks (in given code, say) are public.
    """
    solution, public = set(), set()
    for source in code_cells(notebook):
        inside, outside = split_solutions(source)
        solution.update(inside)
        public.update(line_key(line) for line in outside)
    return {line for line in solution if len(line) >= min_length and line_key(line) not in public}


def all_lines(notebook: Path) -> set[str]:
    """Every line of code of an instructor notebook, solutions included (what is known once due)."""
    return {line for source in code_cells(notebook) for line in code_lines(source).values()}


def module_section(path: Path) -> tuple[int, ...]:
    """The section a helper serves, as :func:`section_order`: ``course/visible/s10_8/x.py`` 10.8
    (it may repeat answers of earlier sections, known by then), any other helper every section."""
    folder = path.parent.name
    return tuple(int(n) for n in re.findall(r"\d+", folder)) if re.fullmatch(r"s\d+(_\d+)*", folder) else ()


def _release_sections(bundle: Path) -> list[str] | None:
    record = bundle / RELEASE_FILE
    return json.loads(record.read_text())["sections"] if record.is_file() else None


def find_leaks(bundle: Path, solutions: Path, due: list[str] | None = None) -> list[str]:
    """Every file or line of the bundle that gives away solutions, hidden tests or checks.

    ``due``: the assignments released (default: the bundle's record, else its notebooks).
    A notebook may carry the solutions of earlier sections (given code); no file may hold
    a solution line of a section not yet due, nor a notebook its own solutions; a visible module
    (``course/visible/s10_X``) no distinctive line of an answer of 10.X or later, another helper
    none of any. Lines are compared as code (:func:`code_lines`): strings and comments are not.
    """
    sources = {p.parent.name: p for p in sorted(solutions.glob("*/*.ipynb"))}
    present = sorted({p.parent.name for p in (bundle / "notebooks").glob("*/*.ipynb")})
    due = due if due is not None else (_release_sections(bundle) or present)
    files = [p for p in sorted(bundle.rglob("*")) if ".git" not in p.relative_to(bundle).parts]
    leaks = [f"{p.relative_to(bundle)}: instructor folder" for p in files
             if p.is_dir() and p.name in INSTRUCTOR_DIRS]
    leaks += [f"{p.relative_to(bundle)}: instructor file" for p in files
              if p.is_file() and p.name in INSTRUCTOR_FILES]
    leaks += [f"notebooks/{a}: section not yet due" for a in present if a not in due]
    known = {line_key(line) for a in due if a in sources for line in all_lines(sources[a])}
    future = {line for a, p in sources.items() if a not in due for line in solution_lines(p)
              if line_key(line) not in known}
    distinctive = {a: solution_lines(p, min_length=DISTINCTIVE) for a, p in sources.items()}
    answers = {a: answer_lines(p) for a, p in sources.items()}
    for path in files:
        if not path.is_file() or path.suffix not in {".ipynb", ".py", ".md", ".txt", ".yml", ".toml"}:
            continue
        text = code_text(path)
        name = path.relative_to(bundle)
        leaks += [f"{name}: {m!r}" for m in MARKERS if m in text]
        if path.suffix == ".ipynb":
            code = set().union(*(code_keys(source) for source in code_cells(path)))
            leaks += repeated_answers(path, answers)
            own = solution_lines(sources[path.parent.name]) if path.parent.name in sources else set()
            leaks += [f"{name}: solution line {line!r}" for line in lines_in(own, code)]
            leaks += [f"{name}: solution line of a section not yet due {line!r}"
                      for line in lines_in(future - own, code)]
        elif path.suffix == ".py":
            helpers = set().union(*(lines for a, lines in distinctive.items()
                                    if section_order(a) >= module_section(name)))
            leaks += [f"{name}: solution line {line!r}" for line in lines_in(helpers, code_keys(text))]
    return leaks


def answer_lines(notebook: Path) -> set[str]:
    """The distinctive lines of code (``DISTINCTIVE`` characters or more) inside the solution
    blocks of an instructor notebook, wherever else they also stand."""
    return {line for source in code_cells(notebook) for line in split_solutions(source)[0]
            if len(line) >= DISTINCTIVE}


def repeated_answers(notebook: Path, answers: dict[str, set[str]]) -> list[str]:
    """Each code cell of a learner notebook holding ``REPEATED`` or more lines of the answers
    (``answers``: assignment -> :func:`answer_lines`) of its own section or a later one, released or
    not, that no earlier section's answer has: given code may carry earlier answers, never the
    exercises still ahead."""
    here = section_order(notebook.parent.name)
    earlier = {line_key(line) for name, lines in answers.items() if section_order(name) < here
               for line in lines}
    ahead = {line for name, lines in answers.items() if section_order(name) >= here for line in lines
             if line_key(line) not in earlier}
    leaks = []
    for index, source in enumerate(code_cells(notebook)):
        repeated = sorted(set(lines_in(ahead, code_keys(source))))
        if len({line_key(line) for line in repeated}) >= REPEATED:
            leaks.append(f"{notebook.parent.name}/{notebook.name}: code cell {index} repeats "
                         f"{len(repeated)} lines of an answer still ahead, e.g. {repeated[0]!r}")
    return leaks
