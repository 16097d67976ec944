"""mha_parameters (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_3.mha_parameters import NO_BIAS, NO_W_O, PER_HEAD, SMALL_HEADS
from tests.answers import bug, not_a_number, right

EXERCISE = "mha_parameters"


def answers(solution):
    return [
        right("solution", solution["mha_parameters"]),
        right("a float", 288.0),
        right("near enough: rounds to the integer", 287.6),
        bug("full layers per head", 1152, hidden="for every head", mistake=PER_HEAD),
        bug("biases left out", 256, hidden="without the biases", mistake=NO_BIAS),
        bug("W_O left out", 216, hidden="without the output projection", mistake=NO_W_O),
        bug("d_k x d_k layers per head", 96, hidden="d_k × d_k", mistake=SMALL_HEADS),
        bug("an unexpected number", 300, hidden="is not the number of parameters"),
        *not_a_number(288),
    ]
