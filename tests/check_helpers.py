"""Assertions for testing the hidden checks themselves."""

from __future__ import annotations

import re

import pytest


def assert_passes(check, impl) -> None:
    """The check accepts ``impl``."""
    check(impl)


def assert_fails(check, impl, match: str) -> str:
    """The check rejects ``impl`` with a message matching ``match`` (a regex); returns it."""
    with pytest.raises(AssertionError) as failure:
        check(impl)
    message = str(failure.value)
    assert re.search(match, message, flags=re.IGNORECASE), f"expected /{match}/ in: {message}"
    return message


def assert_registered(section: str, package, names) -> None:
    """The clean-process verifier finds each of ``names`` in ``section``'s package, and the package's
    ``check_<name>`` is the registered exercise's check."""
    from grader.checks import EXERCISES, SECTIONS

    assert SECTIONS[section] is package
    for name in names:
        assert EXERCISES[name].name == name
        assert getattr(package, f"check_{name}") == EXERCISES[name].check


def assert_records_verify(package, names, solution, folder, monkeypatch) -> None:
    """The records the solution's checks save in ``folder`` pass the clean-process verification."""
    from grader.autograde.worker.verify import verify_records

    monkeypatch.setenv("COURSE_GRADING_DIR", str(folder))
    for name in names:
        getattr(package, f"check_{name}")(solution[name])
    verdicts = verify_records(folder)
    assert set(verdicts) == set(names)
    assert all(v.passed for v in verdicts.values()), {k: v.reason for k, v in verdicts.items()}
