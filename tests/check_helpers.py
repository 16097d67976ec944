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
