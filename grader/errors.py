"""Errors the grading tools raise for problems a person can fix.

Library functions raise these with a message that says what to do; only the command
line (:mod:`grader.__main__`) turns them into a printed message and an exit code.
"""

from __future__ import annotations


class GraderError(Exception):
    """A problem with the input or the course folder; the message says how to fix it."""

    exit_code = 1


class UsageError(GraderError):
    """An argument is malformed (a shard, a deadline, an assignment name)."""

    exit_code = 2


class CourseNotFound(GraderError):
    """No course folder (``solutions/`` and ``nbgrader_config.py``) could be found."""


class SubmissionsError(GraderError):
    """The submissions cannot be read as a class (nothing found, a zip too large)."""


class MergeError(GraderError):
    """Shard outputs that do not add up to one whole batch."""


class PublishError(GraderError):
    """Generating or bundling the learner material would lose or leak something."""


class GradebookError(GraderError):
    """An autograde output that cannot be imported into the course's nbgrader gradebook."""


class SandboxError(GraderError):
    """The kernels' sandbox cannot run torch here (limits too low, files unreadable)."""


class TemplateError(GraderError):
    """nbgrader cannot record an assignment's source notebooks (its metadata is broken)."""


class ShadowedPackage(GraderError):
    """Python imported the course helpers (``course``) from somewhere else than the course."""


class ExportError(GraderError):
    """Grades that cannot be exported as asked (no roster where one is needed, a bad roster)."""
