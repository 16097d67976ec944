"""Does nothing the learner holds earn a point? Every function and class the student release
ships (the modules of ``course/`` the notebooks import, and the definitions of every given cell)
is handed in as the answer to every exercise whose signature it fits: no hidden check may accept it.

A notebook's given cells carry the answers of the sections before it (10.3 starts from 10.2's
attention, released after 10.2 was due): they are tried on the exercises of their own section
and the later ones.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import io
import re
import signal
from pathlib import Path

import pytest

from course.checking import Prediction, single_thread
from grader.checks import EXERCISES, SECTIONS
from grader.publish.bundle import helper_files, parse_code
from samples import ROOT, as_python, load_solution_namespace
from tests.answers import assignment_of

#: Exercises whose shipped reference still earns credit; fixed on other branches (issue 27).
SECONDS = 20  # a candidate that runs longer earns nothing either; the limit keeps the test finite


def learner_notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*/*.ipynb"))


def shipped_modules() -> list[str]:
    """The ``course`` modules the release ships (what the learner notebooks import, directly or not)."""
    package = ROOT / "course"
    files = [p for p in helper_files(learner_notebooks(), package) if p.suffix == ".py"]
    names = (".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files)
    return sorted(name.removesuffix(".__init__") for name in names)


def _definitions(tree: ast.Module) -> list[ast.stmt]:
    """A cell's imports, functions, classes and plain constants: what defining its callables needs,
    without running its demos or training."""
    simple = (ast.Constant, ast.Name, ast.Attribute, ast.Tuple)
    return [node for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
            or (isinstance(node, ast.Assign) and isinstance(node.value, simple))]


def given_callables(notebook: Path) -> dict[str, object]:
    """The functions and classes the learner notebook's cells define (exercise cells hold stubs)."""
    import nbformat

    name = f"given_{notebook.parent.name.replace('.', '_').replace('-', '_')}"
    namespace: dict = {"__name__": name}
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in _definitions(parse_code(as_python(cell.source))):
            with contextlib.suppress(Exception):
                exec(compile(ast.Module([node], []), f"<{notebook.name}>", "exec"), namespace)  # noqa: S102
    return {f"{notebook.parent.name.split('-')[0]}: {key}": value for key, value in namespace.items()
            if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == name}


def given_in(name: str) -> str | None:
    """The section of a given cell's callable ("10.3: MultiHeadAttention"), None for a module's."""
    match = re.match(r"(\d+\.\d+): ", name)
    return match and match[1]


def section_key(section: str) -> tuple[int, ...]:
    return tuple(int(part) for part in section.split("."))


def course_callables() -> dict[str, object]:
    """The functions and classes the shipped modules define, and the callables they hold in
    module-level dicts (a check's table of variants: ``VARIANTS[name]``)."""
    found = {}
    for module_name in shipped_modules():
        module = importlib.import_module(module_name)
        for key, value in vars(module).items():
            if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module_name:
                found[f"{module_name}.{key}"] = value
            if isinstance(value, dict) and not key.startswith("__"):
                found.update({f"{module_name}.{key}[{k}]": v for k, v in value.items() if callable(v)})
    return found


def fits(candidate, exercise) -> bool:
    """Is the candidate the same kind (class or function) and can it take the exercise's required
    positional arguments?"""
    if inspect.isclass(candidate) != inspect.isclass(exercise):
        return False
    try:
        wanted = [p for p in inspect.signature(exercise).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        inspect.signature(candidate).bind(*range(len(wanted)))
    except (TypeError, ValueError):
        return False
    return True


def solutions() -> dict[str, object]:
    """Every exercise's solution by name (for its signature), from the instructor notebooks."""
    found = {}
    for section in SECTIONS:
        namespace = load_solution_namespace(assignment_of(section))
        found.update({name: namespace[name] for name in SECTIONS[section].EXERCISES if name in namespace})
    return found


@functools.cache
def candidates() -> dict[str, object]:
    """What the release ships: the course modules' callables and the given cells' (built once per
    process, when a test first needs them)."""
    given = {k: v for nb in learner_notebooks() for k, v in given_callables(nb).items()}
    return {**course_callables(), **given}


class _TooSlow(Exception):
    pass


def _credited(exercise: str, candidate) -> bool:
    """Does the hidden check of ``exercise`` accept ``candidate`` (within SECONDS)?"""
    def stop(*_):
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(SECONDS)
    try:
        with contextlib.redirect_stdout(io.StringIO()), single_thread():
            EXERCISES[exercise].check(candidate)
    except BaseException as error:  # noqa: BLE001 - any failure, error or time-out earns nothing
        if isinstance(error, KeyboardInterrupt):
            raise
        return False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        import matplotlib.pyplot as plt  # Agg: the solution namespaces chose it

        plt.close("all")  # what the figure helpers drew
    return True


def test_the_release_ships_callables_to_try():
    """Are the shipped modules and the given cells' definitions found (so the test below tries them)?"""
    modules = shipped_modules()
    assert "course.checking" in modules and "course.visible.s10_7.warmup_cosine_lr" in modules
    assert "course.visible.s10_7.warmup_cosine_lr.expected_schedule" in candidates()
    assert "10.7: MultiHeadAttention" in candidates()  # a given cell's, from an earlier section
    assert any("[" in name for name in candidates())  # a table of variants' entries
    assert sum(name.startswith("10.") for name in candidates()) >= 10  # the given cells' own


#: Exercises whose answer is code (a prediction's is a number: nothing shipped can be handed in).
COMPUTING = [name for name, exercise in EXERCISES.items() if not isinstance(exercise, Prediction)]


@pytest.mark.slow  # about 25 CPU seconds: some 1 400 candidates
@pytest.mark.parametrize("exercise", COMPUTING)
def test_nothing_shipped_earns_credit(exercise):
    """Does every shipped callable that fits the exercise's signature fail its hidden check?"""
    reference = solutions().get(exercise)
    if reference is None:
        pytest.skip(f"{exercise}: no solution in the instructor notebooks of this checkout")
    section = next(s for s, package in SECTIONS.items() if exercise in package.EXERCISES)
    tried = {name: c for name, c in candidates().items() if fits(c, reference)
             and section_key(given_in(name) or section) <= section_key(section)}
    assert tried, f"{exercise}: no shipped callable fits its signature, the sweep hands in nothing"
    credited = [name for name, candidate in tried.items() if _credited(exercise, candidate)]
    assert not credited, f"{exercise} is earned by what the release ships: {credited}"
