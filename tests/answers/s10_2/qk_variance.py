"""qk_variance (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_2.qk_variance import MEAN, SCALED, SQUARED, STANDARD_DEVIATION
from tests.answers import bug, not_a_number, right

EXERCISE = "qk_variance"


def answers(solution):
    return [
        right("solution", solution["qk_variance"]),
        right("a float", 64.0),
        right("near enough: rounds to the integer", 63.8),
        bug("the standard deviation", 8, hidden="standard deviation", mistake=STANDARD_DEVIATION),
        bug("after scaling", 1, hidden="after dividing by sqrt", mistake=SCALED),
        bug("d_k squared", 4096, hidden="multiplied by itself", mistake=SQUARED),
        bug("the mean", 0, hidden="the mean of", mistake=MEAN),
        bug("an unexpected number", 32, hidden="is not the variance"),
        *not_a_number(64),
    ]
