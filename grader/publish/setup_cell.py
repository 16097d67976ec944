"""Point a learner notebook's set-up cell at the repository it is published as.

On Colab a learner notebook has nothing but itself: its set-up cell installs the course
helpers with one pip line from the student repository, at a branch::

    %pip install -q git+https://github.com/OWNER/NAME@BRANCH

The student release (:mod:`grader.publish.bundle`) rewrites ``OWNER/NAME@BRANCH`` to the
repository and branch it is published as. The rewrite is keyed on that address, not on
where the cell is or what else it says. :func:`neutral` puts a fixed text in its place, so
the grader does not take a published set-up cell for an edited read-only cell.
"""

from __future__ import annotations

import re

from grader.errors import PublishError

#: Where the helpers come from: pip's address of a GitHub repository at a branch.
SOURCE = re.compile(r"(?P<head>git\+https://github\.com/)(?P<repository>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)"
                    r"(?:\.git)?@(?P<branch>[A-Za-z0-9._/-]*[A-Za-z0-9_/-])")
BRANCH_NAME = re.compile(r"^[A-Za-z0-9._/-]+$")
REPOSITORY_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
NEUTRAL = "git+https://github.com/<published repository>"


def pip_source(repository: str, branch: str) -> str:
    """What pip installs the helpers from: ``git+https://github.com/OWNER/NAME@BRANCH``."""
    return f"git+https://github.com/{repository}@{branch}"


def clone_url(repository: str) -> str:
    """``OWNER/NAME`` -> the https URL git fetches (what pip clones)."""
    return f"https://github.com/{repository}"


def course_source(text: str) -> tuple[str, str] | None:
    """``(repository, branch)`` a cell's code installs the helpers from; None without one."""
    match = SOURCE.search(text)
    return (match["repository"], match["branch"]) if match else None


def check_names(repository: str, branch: str) -> None:
    if not REPOSITORY_NAME.match(repository):
        raise PublishError(f"--repository {repository!r}: expected GitHub's OWNER/NAME, "
                           "e.g. example-org/transformer-course.")
    if not BRANCH_NAME.match(branch) or branch.startswith("-") or branch.endswith("."):
        raise PublishError(f"--branch {branch!r}: expected a branch name such as main or term-2027.")


def point_at(text: str, repository: str, branch: str, where: str = "the set-up cell") -> str:
    """``text`` (a set-up cell's code) installing the helpers from ``repository`` at ``branch``.

    Raises PublishError unless the cell names exactly one such address: without it the
    notebook could not install its helpers on Colab.
    """
    check_names(repository, branch)
    found = len(SOURCE.findall(text))
    if found != 1:
        raise PublishError(
            f"{where} names {found} addresses `git+https://github.com/OWNER/NAME@BRANCH`; "
            "exactly one (its pip line for Colab) is needed to point the notebook at the "
            "published repository: restore it in solutions/ and run `python -m grader generate`.")
    return SOURCE.sub(lambda m: m["head"] + f"{repository}@{branch}", text)


def neutral(text: str) -> str:
    """``text`` with what :func:`point_at` changes put back to a fixed form (for comparing a
    learner's set-up cell with the instructor's)."""
    return SOURCE.sub(NEUTRAL, text)
