"""How checks are registered by name and found, and what they leave behind while grading.

An exercise's visible check is a function ``check_<exercise>`` in a module of its own,
decorated with :func:`visible_check`; a section's package (``course.visible.s10_4``) finds
them with :func:`gather_checks`, so adding an exercise adds one module and nothing else.

While a class is graded (``COURSE_GRADING_DIR`` is set), every check also saves its outcome
(passed, failed with the name of the mistake it recognised, or not attempted) as a small
JSON file there: the grader's class report counts the mistakes of a whole class from them.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import pkgutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import torch

from course.checking.failure import WIDTH, CheckFailure, NotAttempted
from course.checking.outputs import single_thread

#: Set by the grader while it grades: where checks leave records and outcomes.
GRADING_DIR_ENV = "COURSE_GRADING_DIR"
OUTCOME_SUFFIX = ".outcome.json"


def visible_check(check: Callable) -> Callable:
    """Decorator of ``check_<exercise>``: one thread, gradients on, NotImplementedError shown as
    :class:`NotAttempted`, and the outcome saved while grading."""
    exercise = check.__name__.removeprefix("check_")

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            with single_thread(), torch.enable_grad():
                result = check(*args, **kwargs)
        except NotImplementedError:
            failure = NotAttempted(exercise)
            save_outcome(exercise, "visible", failure)
            raise failure from None
        except CheckFailure as failure:
            save_outcome(exercise, "visible", failure)
            raise
        save_outcome(exercise, "visible", None)
        return result

    run.exercise = exercise
    return run


def submodules(package: str) -> list:
    """Every module of ``package``, imported: a section's exercises, one module each."""
    return [importlib.import_module(f"{package}.{info.name}")
            for info in pkgutil.iter_modules(importlib.import_module(package).__path__)]


def gather_checks(package: str) -> dict[str, Callable]:
    """``{"check_<exercise>": check}`` for every visible check in the modules of ``package``."""
    found = {}
    for module in submodules(package):
        for name, value in vars(module).items():
            if name.startswith("check_") and getattr(value, "exercise", None) == name[len("check_"):]:
                found[name] = value
    return found


def save_outcome(exercise: str, side: str, failure: CheckFailure | None) -> None:
    """While grading, note how ``side`` ("visible" or "hidden") of a check ended; else nothing."""
    folder = os.environ.get(GRADING_DIR_ENV)
    if not folder:
        return
    status = ("passed" if failure is None else
              "not attempted" if isinstance(failure, NotAttempted) else "failed")
    mistake = getattr(failure, "mistake", None)
    payload = {"exercise": exercise, "side": side, "status": status,
               "mistake": None if mistake is None else
               {"name": mistake.name, "description": mistake.description},
               "message": "" if failure is None else str(failure)[:2000]}
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{exercise}.{side}{OUTCOME_SUFFIX}").write_text(json.dumps(payload))


def passed(message: str) -> None:
    """Say that a check passed, wrapped at word boundaries."""
    print(textwrap.fill(f"✓ {message}", WIDTH, subsequent_indent="  ", break_long_words=False,
                        break_on_hyphens=False))
