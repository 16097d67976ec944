"""cheese_tokens (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_9.cheese_tokens import NO_MARKER, ONE_WORD, SENTENCE_MARKERS
from tests.answers import bug, not_a_number, right

EXERCISE = "cheese_tokens"


def answers(solution):
    return [
        right("solution", solution["cheese_tokens"]),
        right("a float", 7.0),
        bug("no end-of-word marker", 6, hidden="without the end-of-word marker", mistake=NO_MARKER),
        bug("one token", 1, hidden="one token for the word", mistake=ONE_WORD),
        bug("with <bos> and <eos>", 8, hidden="counted with the word", mistake=SENTENCE_MARKERS),
        bug("an unexpected number", 3, hidden="is not"),
        *not_a_number(7),
    ]
