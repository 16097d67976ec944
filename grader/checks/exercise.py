"""An exercise's hidden check: run every case, compare, diagnose, record.

Each exercise is one module of its section's package (``grader/checks/s10_1/...``) holding one
:class:`GradedExercise` subclass decorated with :func:`registered`; the package finds them with
:func:`gather_exercises`, which also derives ``check_<name>``, the function the hidden test cell
calls with the learner's function or class. Known mistakes are the visible check's
:class:`~course.checking.Mistake` objects, each paired here with a function that reproduces it
on a case: ``mistakes = {SWAPPED: run}``, ``run(case, device) -> Outputs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import torch

from course import checking
from course.checking.exercise import seeded_parameters  # noqa: F401
from course.checking.modules import load_parameters  # noqa: F401
from course.checking.registry import save_outcome, submodules
from grader.checks import integrity
from grader.checks.guarded_calls import (
    Case,
    CheckFailure,
    ForbiddenCall,
    detach_outputs,
    exact_matmul,
    grading_device,
)


class GradedExercise(checking.Exercise):
    """The toolkit's exercise (:class:`course.checking.exercise.Exercise`: cases, run, reference,
    mistakes, what learner code may not call) graded: on the grading device, the outcome recorded
    for the clean-process verification."""

    #: Added to every visible case's seed: grading runs the visible cases on other data.
    RESEED = 1000
    #: Grading's own cases, after the visible ones re-seeded (other sizes, float64, another option).
    own_cases: Sequence[Case] = ()
    #: Grading's device probe runs every visible case on 'meta', not only the first.
    cases_on_meta = math.inf

    def cases(self) -> Sequence[Case]:
        """Every visible case with another seed, then grading's own (a check that needs other
        instances of every kind lists its cases itself)."""
        reseeded = [replace(case, seed=case.seed + self.RESEED) for case in self.visible_cases]
        return [*reseeded, *self.own_cases]

    def check(self, impl) -> None:
        """The hidden test: every case against the reference, then the extra checks."""
        device = grading_device()
        record = integrity.Record(self.name)
        try:
            with exact_matmul(), single_thread(), self.on_reference_pieces(impl):
                self._check_all(impl, device, record)
        except CheckFailure as failure:
            if isinstance(failure, ForbiddenCall):
                record.flag(str(failure))
            save_outcome(self.name, "hidden", failure)
            raise
        finally:
            record.save(device)
        save_outcome(self.name, "hidden", None)
        count = len(self.cases())
        match = "case matches" if count == 1 else "cases match"
        print(f"✓ {self.name}: {count} {match} {self.reference_name} on {device}.")

    def _check_all(self, impl, device: torch.device, record: integrity.Record) -> None:
        tampering = integrity.tamper_report()
        if tampering:
            record.flag("; ".join(tampering))
            raise CheckFailure("The grading environment was modified: " + "; ".join(tampering))
        for case in self.cases():
            got = self.run(impl, case, device)
            self.evaluate(case, got, device)
            record.add(case.name, detach_outputs(got))
        self.extra_checks(impl, device)
        self.probe_devices(impl)
        record.passed = True


# ---------------------------------------------------------------- registering exercises


def registered(cls: type[GradedExercise]) -> type[GradedExercise]:
    """Class decorator: this module's exercise, found by :func:`gather_exercises`."""
    cls.registered = True
    return cls


def gather_exercises(package: str) -> dict[str, GradedExercise]:
    """One instance of every registered exercise in the modules of ``package``, by name."""
    found: dict[str, GradedExercise] = {}
    for module in submodules(package):
        for value in vars(module).values():
            if isinstance(value, type) and value.__dict__.get("registered") \
                    and value.__module__ == module.__name__:
                exercise = value()
                found[exercise.name] = exercise
    return found


def check_functions(exercises: Mapping[str, GradedExercise]) -> dict[str, Callable]:
    """``{"check_<name>": exercise.check}``: what the hidden test cells call."""
    return {f"check_{name}": exercise.check for name, exercise in exercises.items()}


# ---------------------------------------------------------------- helpers for subclasses

single_thread = checking.single_thread
#: Outputs and gradients for seeded random cotangents (the toolkit's, as the visible checks use).
forward_backward = checking.with_gradients
expect_value_error = checking.expect_value_error

