"""character_model (a prediction): the right choice written differently, and the expected wrong ones."""

from course.visible.s10_9.character_model import HARD_TOKENS, ONE_RANKING, REVERSED
from tests.answers import bug, right

EXERCISE = "character_model"


def answers(solution):
    return [
        right("solution", solution["character_model"]),
        right("upper case, spaces", " B "),
        bug("one ranking for both", "a", hidden="one ranking for both figures", mistake=ONE_RANKING),
        bug("hard character tokens", "c", hidden="taken for hard ones", mistake=HARD_TOKENS),
        bug("reversed", "d", hidden="the wrong way round", mistake=REVERSED),
        bug("not a letter", "characters", hidden="should be one of the letters"),
        bug("a number", 2, hidden="should be one of the letters"),
        bug("not answered", None, hidden="not written yet"),
    ]
