"""Point a learner notebook's set-up cell at the repository it is published as.

On Colab a learner notebook has nothing but itself: its set-up cell clones the course
helpers and data from ``COURSE_SOURCE``, a line every learner notebook has once::

    COURSE_SOURCE = os.environ.get("COURSE_SOURCE", "https://github.com/OWNER/NAME.git")

The student release (:mod:`grader.publish.bundle`) rewrites that default to the
repository it is published as, and makes the cell's ``git clone`` fetch the published
branch (``--branch``). The rewrite is keyed on that line and on the ``git clone`` call,
not on where the cell is or what else it says. :func:`neutral` undoes both, so the grader
does not take a published set-up cell for an edited read-only cell.
"""

from __future__ import annotations

import re

from grader.errors import PublishError

#: The line that says where the helpers come from; ``url`` is its default.
SOURCE_LINE = re.compile(
    r"""^(?P<head>[ \t]*COURSE_SOURCE[ \t]*=[ \t]*os\.environ\.get\([ \t]*(?P<q>["'])COURSE_SOURCE(?P=q)"""
    r"""[ \t]*,[ \t]*(?P<q2>["']))(?P<url>[^"'\n]*)(?P<tail>(?P=q2)[ \t]*\))""", re.M)
#: ``git clone`` in a shell string, and ``"clone",`` in an argument list.
CLONE_TEXT = re.compile(r"\bgit clone\b")
CLONE_LIST = re.compile(r"""(?P<q>["'])clone(?P=q)[ \t]*,""")
#: What :func:`point_at` inserts, so that :func:`neutral` can take it out again.
BRANCH_TEXT = re.compile(r"\bgit clone --branch [A-Za-z0-9._/-]+")
BRANCH_LIST = re.compile(r"""(?P<q>["'])clone(?P=q)[ \t]*,[ \t]*(?P=q)--branch(?P=q)[ \t]*,[ \t]*"""
                         r"""(?P=q)[A-Za-z0-9._/-]+(?P=q)[ \t]*,""")
BRANCH_NAME = re.compile(r"^[A-Za-z0-9._/-]+$")
REPOSITORY_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def clone_url(repository: str) -> str:
    """``OWNER/NAME`` -> the https URL ``git clone`` takes."""
    return f"https://github.com/{repository}.git"


def course_source(text: str) -> str | None:
    """The default ``COURSE_SOURCE`` of a cell's code, or None when it has no such line."""
    match = SOURCE_LINE.search(text)
    return match["url"] if match else None


def check_names(repository: str, branch: str) -> None:
    if not REPOSITORY_NAME.match(repository):
        raise PublishError(f"--repository {repository!r}: expected GitHub's OWNER/NAME, "
                           "e.g. example-org/transformer-course.")
    if not BRANCH_NAME.match(branch) or branch.startswith("-"):
        raise PublishError(f"--branch {branch!r}: expected a branch name such as main or term-2027.")


def point_at(text: str, repository: str, branch: str, where: str = "the set-up cell") -> str:
    """``text`` (a set-up cell's code) fetching the helpers from ``repository`` at ``branch``.

    Raises PublishError when the cell has no ``COURSE_SOURCE`` line or no ``git clone``
    to point at the branch: such a notebook could not fetch its helpers on Colab.
    """
    check_names(repository, branch)
    text = neutral(text)
    found = len(SOURCE_LINE.findall(text))
    if found != 1:
        raise PublishError(
            f"{where} has {found} lines `COURSE_SOURCE = os.environ.get(\"COURSE_SOURCE\", "
            "\"<url>\")`; exactly one is needed to point the notebook at the published "
            "repository: restore it in solutions/ and run `python -m grader generate`.")
    text = SOURCE_LINE.sub(lambda m: m["head"] + clone_url(repository) + m["tail"], text)
    pointed = CLONE_TEXT.sub(f"git clone --branch {branch}", text)
    pointed = CLONE_LIST.sub(lambda m: f'{m[0]} {m["q"]}--branch{m["q"]}, {m["q"]}{branch}{m["q"]},',
                             pointed)
    if pointed == text:
        raise PublishError(f"{where} has no `git clone` to point at branch {branch!r}: keep "
                           "the clone of COURSE_SOURCE in the set-up cell.")
    return pointed


def neutral(text: str) -> str:
    """``text`` with what :func:`point_at` changes put back to a fixed form (for comparing a
    learner's set-up cell with the instructor's)."""
    text = BRANCH_TEXT.sub("git clone", text)
    text = BRANCH_LIST.sub(lambda m: f'{m["q"]}clone{m["q"]},', text)
    return SOURCE_LINE.sub(lambda m: m["head"] + "<published repository>" + m["tail"], text)
