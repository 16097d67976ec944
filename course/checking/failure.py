"""The one failure type of every check, and how Jupyter shows it.

A failing check is a :class:`CheckFailure` (an ``AssertionError``, so pytest and nbgrader
treat it as a failed test). In IPython (Jupyter, Colab) it is shown as its message alone,
wrapped at word boundaries, instead of a traceback through the course's own frames; when
learner code raised, the line of the learner's code that did is added. The cell still ends
in an error, so nbgrader's Validate and the grader count it as failed.
"""

from __future__ import annotations

import textwrap
import traceback
from pathlib import Path

#: Width of the lines a learner reads (the notebook's text width at 1366 px).
WIDTH = 88
#: Frames from these folders are the course's or PyTorch's, never the learner's.
_NOT_LEARNER = (str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2] / "grader"),
                "site-packages", "dist-packages", "/lib/python")


class CheckFailure(AssertionError):
    """A check failed; the message is meant for the learner.

    ``mistake`` is the known mistake the check recognised (a :class:`~course.checking.Mistake`),
    if any: the class report counts failures by it.
    """

    def __init__(self, message: str, mistake=None):
        super().__init__(message)
        self.mistake = mistake

    def lines(self) -> list[str]:
        """The message wrapped for a notebook, first line marked with a cross."""
        out: list[str] = []
        for paragraph in str(self).strip().splitlines() or [""]:
            out += textwrap.wrap(paragraph, WIDTH - 2, break_long_words=False, break_on_hyphens=False) or [""]
        learner_line = _learner_frame(self.__cause__)
        if learner_line:
            out.append(learner_line)
        return ["✗ " + out[0]] + ["  " + line for line in out[1:]]

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of the traceback (IPython's documented hook)."""
        return self.lines()


class NotAttempted(CheckFailure):
    """The exercise, or learner code it calls (``raised_in``: another exercise's cell), still raises
    NotImplementedError: one line, no traceback."""

    def __init__(self, exercise: str, raised_in: str | None = None):
        if raised_in and raised_in != exercise:
            super().__init__(f"{exercise} cannot be checked yet: it calls {raised_in}, which is not written "
                             f"yet. Fill in {raised_in}'s cell, run it, then run this check again.")
        else:
            super().__init__(f"{exercise} is not written yet: fill in its cell above, run it, then run this "
                             "check again.")
        self.exercise = exercise

    def lines(self) -> list[str]:
        return ["✗ " + str(self)]


def is_learner_file(filename: str) -> bool:
    """Is code of this file the learner's (a notebook cell), not the course's, PyTorch's or Python's?"""
    return not any(part in filename for part in _NOT_LEARNER)


def raising_definition(error: BaseException) -> str | None:
    """The learner's function or class (its top-level name) whose code raised ``error``, if any."""
    frames = [f for f in traceback.walk_tb(error.__traceback__) if is_learner_file(f[0].f_code.co_filename)]
    return frames[-1][0].f_code.co_qualname.split(".")[0] if frames else None


def _learner_frame(error: BaseException | None) -> str | None:
    """Where the learner's own code raised ``error``, as one line (None when it did not)."""
    if error is None or error.__traceback__ is None:
        return None
    frames = [f for f in traceback.extract_tb(error.__traceback__) if is_learner_file(f.filename)]
    if not frames:
        return None
    frame = frames[-1]
    code = f": {frame.line.strip()}" if frame.line else ""
    return f"(raised in {frame.name}, line {frame.lineno} of its cell{code})"


def explain_exception(exercise: str, error: Exception, where: str) -> str:
    """A learner-facing sentence for an exception raised by learner code in ``where``."""
    if isinstance(error, NotImplementedError):
        return f"{exercise} is not implemented yet (it raised NotImplementedError)."
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if "device" in text and ("expected device" in text or "same device" in text):
        return (
            f"{exercise} mixes devices in {where}: {text}. Create new tensors on the inputs' "
            "device (device=x.device, or torch.zeros_like(x)); never on a fixed device."
        )
    if "view size is not compatible" in text:
        return (f"{exercise} raised RuntimeError in {where}: {text[:80]}... .view was called on a "
                "tensor that is not contiguous in memory (a transpose, a permute or a slice such as "
                "x[:, :-1] can leave one so): use .reshape, or .contiguous().view.")
    return f"{exercise} raised {type(error).__name__} in {where}: {text}"
