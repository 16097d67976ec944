"""Moved to the top-level ``samples`` module (tests and bench both import it from there).

Kept only for the test modules still being rewritten elsewhere
(``tests/test_layout.py``'s ``PENDING_SAMPLES_IMPORTS`` lists them); remove with the last one.
"""

from samples import *  # noqa: F403
