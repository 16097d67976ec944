"""Does every kind of case that grading tests have a visible instance, so that the visible check
predicts the grade? Each hidden case names its kind; the exercise's visible cases must have it."""

from __future__ import annotations

import inspect

import pytest

from course import checking
from grader.checks import EXERCISES, SECTIONS

#: Every graded exercise, section by section: each is defined once, in its visible module.
GRADED = [name for section in sorted(SECTIONS) for name in SECTIONS[section].EXERCISES]


@pytest.mark.parametrize("name", GRADED)
def test_every_hidden_kind_has_a_visible_case(name):
    exercise = EXERCISES[name]
    assert all(case.kind for case in exercise.cases()), [c.name for c in exercise.cases() if not c.kind]
    visible = {case.kind for case in exercise.visible_cases}
    missing = {case.kind for case in exercise.cases()} - visible
    assert not missing, f"{name}: grading tests kinds no visible case has: {sorted(missing)}"


@pytest.mark.parametrize("name", GRADED)
def test_the_visible_check_probes_devices_where_grading_does(name):
    """Where grading runs learner code on another device (the engine's probe), does the visible
    side probe for tensors made without a device (check_unplaced_tensors, on the CPU alone)?"""
    exercise = EXERCISES[name]
    visible = next(cls for cls in type(exercise).__mro__ if cls.__module__.startswith("course.visible."))
    if exercise.probes_devices and visible.extra_checks is not checking.Exercise.extra_checks:
        source = inspect.getsource(visible.extra_checks)
        assert "check_unplaced_tensors" in source or "'meta'" in source, name
    assert issubclass(visible, checking.Exercise)
