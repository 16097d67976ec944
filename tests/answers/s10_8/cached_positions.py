"""cached_positions (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_8.cached_positions import ONE_ROW, ONE_SENTENCE, STILL_CACHED, WHOLE_TEXT
from tests.answers import bug, not_a_number, right

EXERCISE = "cached_positions"


def answers(solution):
    return [
        right("solution", solution["cached_positions"]),
        right("a float", 64.0),
        right("near enough: rounds to the integer", 63.8),
        bug("the cache still in use", 8, hidden="as if the cache still held", mistake=STILL_CACHED),
        bug("the whole text", 80, hidden="all 10 of them", mistake=WHOLE_TEXT),
        bug("one sentence", 10, hidden="tokens of one sentence", mistake=ONE_SENTENCE),
        bug("one row", 1, hidden="a single sentence", mistake=ONE_ROW),
        bug("an unexpected number", 16, hidden="is not the number of positions"),
        *not_a_number(64),
    ]
