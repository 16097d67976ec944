"""Do the hidden checks accept every declared right answer and reject every declared bug, with
the message and the named mistake it is declared with (tests/answers/)?"""

from __future__ import annotations

import re

import pytest

from course.checking import single_thread
from grader.checks import EXERCISES
from tests import catalogue, dictation
from tests.answers import declared_sections

ENTRIES = catalogue.build()
RIGHT = [e for e in ENTRIES if e.correct]
BUGS = [e for e in ENTRIES if not e.correct]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


@pytest.mark.parametrize("entry", catalogue.params(RIGHT))
def test_right_answer_passes(entry):
    """Is this right answer, however it is written, accepted by the hidden check?"""
    failure = catalogue.run_hidden(entry)
    assert failure is None, catalogue.message(failure)


@pytest.mark.parametrize("entry", catalogue.params(BUGS))
def test_planted_bug_fails_with_its_message(entry):
    """Is this planted bug rejected by the hidden check, with the message it is declared with,
    naming its mistake where the hidden check knows that mistake?"""
    failure = catalogue.run_hidden(entry)
    assert isinstance(failure, AssertionError), catalogue.message(failure)
    if entry.hidden:
        assert re.search(entry.hidden, str(failure), flags=re.IGNORECASE), \
            f"expected /{entry.hidden}/ in: {failure}"
    if entry.mistake is not None and entry.mistake in EXERCISES[entry.exercise].mistakes:
        assert failure.mistake == entry.mistake, str(failure)
    printed = dictation.answer_line_in(str(failure), entry.section, entry.exercise)
    assert printed is None, f"the message prints a line of the answer ({printed}): {failure}"


def test_every_declared_exercise_has_right_answers_and_bugs():
    """Does every exercise of a declared section have its solution, another right answer and bugs?"""
    for section in declared_sections():
        names = {e.exercise for e in ENTRIES if e.section == section}
        for name in names:
            mine = [e for e in ENTRIES if e.exercise == name]
            assert any(e.label == "solution" for e in mine), name
            assert sum(e.correct for e in mine) >= 2, name
            assert sum(not e.correct for e in mine) >= 3, name


def test_every_device_check_has_a_planted_bug_it_catches():
    """Does every exercise the engine's device probe applies to (all but predictions and
    ``WITHOUT_DEVICE_PROBE``) have a fixed-device bug declared for both sides, so that the probe is
    seen to fail (tests/test_visible.py runs it on the visible side)?"""
    for name, exercise in EXERCISES.items():
        if exercise.probes_devices:
            assert any(e.exercise == name and "device" in (e.hidden or "") and not e.grading_only
                       for e in BUGS), \
                f"{name}: its device probe has no planted fixed-device bug in tests/answers/"
