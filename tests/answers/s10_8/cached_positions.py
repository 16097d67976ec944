"""cached_positions (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_8.cached_positions import ONE_ROW, ONE_SENTENCE, WINDOW, WITHOUT_CACHE
from tests.answers import bug, not_a_number, right

EXERCISE = "cached_positions"


def answers(solution):
    return [
        right("solution", solution["cached_positions"]),
        right("a float", 8.0),
        right("near enough: rounds to the integer", 8.2),
        bug("without the cache", 32, hidden="every token of every sentence", mistake=WITHOUT_CACHE),
        bug("one sentence, without the cache", 4, hidden="tokens of one sentence", mistake=ONE_SENTENCE),
        bug("one row", 1, hidden="a single sentence", mistake=ONE_ROW),
        bug("the window", 64, hidden="the whole window", mistake=WINDOW),
        bug("an unexpected number", 16, hidden="is not the number of positions"),
        *not_a_number(8),
    ]
