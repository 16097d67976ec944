"""most_weights (a prediction): the right choice written differently, and the expected wrong ones."""

from course.visible.s10_5.most_weights import ATTENTION, EQUAL
from tests.answers import bug, right

EXERCISE = "most_weights"


def answers(solution):
    return [
        right("solution", solution["most_weights"]),
        right("upper case, spaces", " B "),
        bug("attention", "a", hidden="Count sizes, not matrices", mistake=ATTENTION),
        bug("about equal", "c", hidden="d_ff = 2 d_model", mistake=EQUAL),
        bug("not a letter", "feed-forward", hidden="should be one of the letters"),
        bug("a number", 2, hidden="should be one of the letters"),
        bug("not answered", None, hidden="not written yet"),
    ]
