"""Predict, then run: a short graded question asked before a demonstration shows its answer.

A :class:`Prediction` is an exercise on the one engine whose learner "code" is a value: a
number (compared after rounding to ``digits`` decimals) or the letter of a choice. The
shipped module holds the answer only as a digest (:func:`digest`), so reading the check does
not show it; each expected wrong answer is a :class:`~course.checking.Mistake` keyed by its
digest, and its message explains what that answer confuses. Grading's subclass adds nothing
but the records: the answer is saved as a tensor and judged again in a clean process.

In the notebook, the answer cell starts ``<name> = None`` (not attempted until replaced) and
its check cell's grade id is ``predict_<name>``.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Callable, Mapping

import torch

from course.checking.exercise import Case, Exercise
from course.checking.failure import CheckFailure, NotAttempted
from course.checking.mistakes import Mistake
from course.checking.outputs import Outputs
from course.checking.registry import passed, visible_check

#: The one case of every prediction.
YOUR_PREDICTION = Case("your prediction", 0, kind="a prediction")


def digest(name: str, answer: str) -> str:
    """The fingerprint of a canonical answer to the question ``name`` (16 hex digits)."""
    return hashlib.sha256(f"{name}:{answer}".encode()).hexdigest()[:16]


class Prediction(Exercise):
    """A number or a choice; subclasses fill in ``name``, ``question``, ``answer`` and ``wrong``."""

    takes_tensors = False

    #: The question in a few words, as the messages say it ("the variance of q·k at d_k = 64").
    question: str = ""
    #: The letters of a choice ("a", "b", "c"); empty for a number.
    choices: tuple[str, ...] = ()
    #: For a number: the decimals that count (0: the nearest integer).
    digits: int = 0
    #: :func:`digest` of the right canonical answer.
    answer: str = ""
    #: Expected wrong answers: their digests, each with the mistake it shows.
    wrong: Mapping[str, Mistake] = {}
    #: Where the notebook shows the answer (said when the prediction is off).
    shown_by: str = "the cells below"
    reference_name = "the answer"
    visible_cases = (YOUR_PREDICTION,)

    @property
    def mistakes(self) -> dict[Mistake, None]:
        """The expected wrong answers' mistakes (recognised by their digests, not by running)."""
        return dict.fromkeys(self.wrong.values())

    def canonical(self, value: object) -> str:
        """The answer as it is fingerprinted ("64", "0.50", "b"); a clear failure for a non-answer."""
        if value is None:  # the answer cell as released: `<name> = None`
            raise NotAttempted(self.name)
        if self.choices:
            if not isinstance(value, str) or value.strip().lower() not in self.choices:
                letters = ", ".join(map(repr, self.choices))
                raise CheckFailure(f"{self.name} should be one of the letters {letters} (a string), "
                                   f"not {value!r}.")
            return value.strip().lower()
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise CheckFailure(f"{self.name} should be a number (an int or a float), not {value!r}.")
        return f"{round(float(value), self.digits):.{self.digits}f}"

    def run(self, impl, case: Case, device: torch.device) -> Outputs:
        """The learner's answer as a tensor, as grading saves it for the clean process."""
        text = self.canonical(impl)
        value = self.choices.index(text) if self.choices else float(text)
        return {"answer": torch.tensor(value, dtype=torch.float64, device=device)}

    def _text(self, got: Outputs) -> str:
        value = got["answer"].item()
        return self.choices[int(value)] if self.choices else f"{value:.{self.digits}f}"

    def evaluate(self, case: Case, got: Outputs, device: torch.device) -> None:
        """Pass on the right answer; name the mistake an expected wrong answer shows."""
        text = self._text(got)
        if digest(self.name, text) == self.answer:
            return
        mistake = self.wrong.get(digest(self.name, text))
        said = f"{self.name} = {text} is not {self.question}."
        if mistake is not None:
            raise CheckFailure(f"{said} {mistake.sentence()}", mistake)
        raise CheckFailure(f"{said} Work it out again from the text above; {self.shown_by} will show it.")


def prediction_check(prediction: type[Prediction], confirmed: str) -> Callable[[object], None]:
    """The notebook's ``check_<name>`` for ``prediction``: the answer judged, and on a right one
    a pass that says what the cells below add (``confirmed``)."""

    def check(value: object) -> None:
        prediction().run_cases(value)
        passed(f"{prediction.name}: right. {confirmed}")

    check.__name__ = check.__qualname__ = f"check_{prediction.name}"
    check.__doc__ = f"Your prediction of {prediction.question}, before {prediction.shown_by} shows it."
    return visible_check(check)
