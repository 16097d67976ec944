"""Does every kind of case that grading tests have a visible instance, so that the visible check
predicts the grade? Each hidden case names its kind; the exercise's visible cases must have it."""

from __future__ import annotations

import pytest

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
def test_grading_tests_every_visible_kind(name):
    """Does grading test every kind of case the visible check has (the engine re-seeds every visible
    case; a check that lists its cases itself must keep them all)?"""
    exercise = EXERCISES[name]
    missing = {case.kind for case in exercise.visible_cases} - {case.kind for case in exercise.cases()}
    assert not missing, f"{name}: grading drops kinds the visible check has: {sorted(missing)}"



@pytest.mark.parametrize("name", GRADED)
def test_every_graded_case_has_its_own_name(name):
    """Is every case grading runs named once (its outputs are recorded and verified by name)?"""
    names = [case.name for case in EXERCISES[name].cases()]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
