"""How checks are registered by name and found, and what they leave behind while grading.

An exercise's visible check is a function ``check_<exercise>`` in a module of its own,
decorated with :func:`visible_check`; a section's package (``course.visible.s10_4``) finds
them with :func:`gather_checks`, so adding an exercise adds one module and nothing else.

While a class is graded, every check also saves its outcome (passed, failed with the name
of the mistake it recognised, or not attempted) for the grader's class report
(:func:`course.checking.records.save_outcome`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import textwrap
from collections.abc import Callable

import torch

from course.checking.failure import WIDTH, CheckFailure, NotAttempted, raising_definition
from course.checking.outputs import single_thread
from course.checking.records import save_outcome


def visible_check(check: Callable) -> Callable:
    """Decorator of ``check_<exercise>``: one thread, gradients on, NotImplementedError shown as
    :class:`NotAttempted`, and the outcome saved while grading."""
    exercise = check.__name__.removeprefix("check_")

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            with single_thread(), torch.enable_grad():
                result = check(*args, **kwargs)
        except NotImplementedError as error:
            failure = NotAttempted(exercise, raising_definition(error))
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


def passed(message: str) -> None:
    """Say that a check passed, wrapped at word boundaries."""
    print(textwrap.fill(f"✓ {message}", WIDTH, subsequent_indent="  ", break_long_words=False,
                        break_on_hyphens=False))
