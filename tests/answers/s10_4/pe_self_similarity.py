"""pe_self_similarity (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_4.pe_self_similarity import EVERY_COLUMN, LENGTH, NORMALISED, ZERO
from tests.answers import bug, not_a_number, right

EXERCISE = "pe_self_similarity"


def answers(solution):
    return [
        right("solution", solution["pe_self_similarity"]),
        right("a float", 32.0),
        right("near enough: rounds to the integer", 31.9),
        bug("every column counted", 64, hidden="only half of them count", mistake=EVERY_COLUMN),
        bug("a unit vector", 1, hidden="not a unit vector", mistake=NORMALISED),
        bug("every sine and cosine 0", 0, hidden="are cos\\(0\\) = 1", mistake=ZERO),
        bug("the length", 5.66, hidden="squared length", mistake=LENGTH),
        bug("an unexpected number", 16, hidden="is not pe\\[0\\]"),
        *not_a_number(32),
    ]
