"""Late penalties: the course's policy, applied by nbgrader's late-submission plugin classes.

A course sets its policy in its ``nbgrader_config.py`` (none by default), the way nbgrader
itself is told: the plugin class of nbgrader's ``AssignLatePenalties`` and that class's
settings. :class:`SharePerPeriod` is the course's own plugin (a share of the points per
started hour or day late, a cap, a grace period)::

    c.AssignLatePenalties.plugin_class = "grader.late.SharePerPeriod"
    c.SharePerPeriod.share = 0.10        # 10% of the points earned ...
    c.SharePerPeriod.period = "day"      # ... per started day late ("hour" or "day")
    c.SharePerPeriod.cap = 0.50          # never more than half of them
    c.SharePerPeriod.grace_minutes = 15  # up to 15 minutes late: no penalty

nbgrader's own plugin works the same way (``c.LateSubmissionPlugin.penalty_method =
"zero"``), and so does any subclass of ``nbgrader.plugins.LateSubmissionPlugin``. Stock
``nbgrader autograde`` applies the same class. The grader computes a row's penalty with it
(:func:`penalty`) from the points after the integrity corrections and the seconds late
nbgrader computed from ``timestamp.txt`` and the due date, kept within 0..points as
nbgrader's ``AssignLatePenalties`` keeps it; grades.csv, the report, the gradebook import
and the LMS export all read it from there, beside the raw score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float

from grader.errors import GraderError

PERIOD_SECONDS = {"hour": 3600, "day": 86400}


class SharePerPeriod(LateSubmissionPlugin):
    """A share of the points earned per started hour or day late, up to a cap, after a grace
    period (counted from the deadline once the grace period is over)."""

    share = Float(0.0, help="share of the points earned taken per started period late").tag(config=True)
    period = Enum(("hour", "day"), default_value="day", help="the period the share is per").tag(config=True)
    cap = Float(1.0, help="the largest share ever taken").tag(config=True)
    grace_minutes = Float(0.0, help="minutes late that cost nothing").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        if total_seconds_late <= self.grace_minutes * 60:
            return 0.0
        periods = math.ceil(total_seconds_late / PERIOD_SECONDS[self.period])
        return score * min(self.cap, self.share * periods)

    def describe(self) -> str:
        grace = f", after {self.grace_minutes:g} min of grace" if self.grace_minutes else ""
        return (f"{self.share:.0%} of the points per started {self.period} late, "
                f"at most {self.cap:.0%}{grace}")


@dataclass
class Policy:
    """The course's late policy: an nbgrader late-submission plugin, configured."""

    plugin: LateSubmissionPlugin

    def describe(self) -> str:
        if isinstance(self.plugin, SharePerPeriod):
            return self.plugin.describe()
        method = getattr(self.plugin, "penalty_method", None)
        name = type(self.plugin).__name__
        return f"{name} (penalty_method {method!r})" if method else name


def load_policy(root: Path | None = None) -> Policy:
    """The policy the course at ``root`` configures (nbgrader's default plugin: no penalty)."""
    from nbgrader.preprocessors import AssignLatePenalties

    from grader.paths import course_config_file

    config = course_config_file(root)
    try:
        assign = AssignLatePenalties(config=config)
        return Policy(assign.plugin_class(parent=assign))
    except Exception as error:  # noqa: BLE001 - a wrong class name or setting, said plainly
        raise GraderError(f"The late policy in the course's nbgrader_config.py cannot be used "
                          f"({type(error).__name__}: {error}): check c.AssignLatePenalties."
                          "plugin_class and its settings (docs/grading.md, 'Late penalties').") from None


def penalty(policy: Policy | None, student: str, score: float, seconds_late: float) -> float:
    """Points taken for lateness, as nbgrader's AssignLatePenalties takes them: only when
    late, never below 0 or above the points earned; rounded to 1/10000 of a point."""
    if policy is None or seconds_late <= 0:
        return 0.0
    from nbgrader.preprocessors import AssignLatePenalties

    taken = policy.plugin.late_submission_penalty(student, score, seconds_late)
    if taken is None:
        return 0.0
    checker = AssignLatePenalties()
    return round(float(checker._check_late_penalty(SimpleNamespace(score=score), taken)), 4)


def apply(results, policy: Policy | None) -> None:
    """Set every result's ``late_penalty`` from ``policy`` (None: leave them as they are)."""
    if policy is None:
        return
    for result in results:
        result.late_penalty = penalty(policy, result.student_id, result.score, result.seconds_late)


# ---------------------------------------------------------------- where lateness came from

#: grades.csv's ``late_source``: what a row's lateness (and so its penalty) was counted from.
FROM_TIMESTAMP = "timestamp.txt"  # nbgrader's submission time, in the student's folder
FROM_SUBMITTED_AT = "submitted-at"  # the --submitted-at CSV of an LMS zip
FROM_LMS = "none (LMS late policy)"  # an LMS zip without times: the LMS applies its own
NO_SOURCE = "none"  # no deadline, or no time


def late_source(result, deadline: str | None, from_csv: bool) -> str:
    """What ``result``'s lateness is counted from, under the run's ``deadline``."""
    if deadline and from_csv:
        return FROM_SUBMITTED_AT
    if deadline and result.submitted_at:
        return FROM_TIMESTAMP
    return FROM_LMS if result.lms else NO_SOURCE


def settings(manifest: dict, assignment: str) -> dict[str, str]:
    """The late settings an autograde run (its manifest) graded ``assignment`` with: the
    deadline (UTC), the course's policy, and the --submitted-at file (its SHA-256)."""
    from grader.autograde.host.submissions import parse_timestamp

    options = manifest.get("options", {})
    deadlines = options.get("deadlines") or {}
    due = deadlines.get(assignment) or deadlines.get("*")
    return {"deadline": parse_timestamp(due).isoformat() if due else "",
            "policy": manifest.get("late_policy", ""),
            "submitted_at": (manifest.get("submitted_at") or {}).get("sha256", "")}


def describe_settings(given: dict[str, str]) -> str:
    """``deadline 2026-12-01T23:59:00+00:00, times from --submitted-at`` (or ``no deadline``)."""
    said = [f"deadline {given['deadline']}" if given.get("deadline") else "no deadline"]
    if given.get("submitted_at"):
        said.append(f"times from --submitted-at (sha256 {given['submitted_at'][:8]})")
    if given.get("policy"):
        said.append(f"policy {given['policy']}")
    return ", ".join(said)
