"""qkv_parameters (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_1.qkv_parameters import ALL_D_K, BIASES, SIZES_ADDED, SQUARE
from tests.answers import bug, not_a_number, right

EXERCISE = "qkv_parameters"


def answers(solution):
    return [
        right("solution", solution["qkv_parameters"]),
        right("a float", 96.0),
        right("near enough: rounds to the integer", 96.3),
        bug("every layer of width d_k", 72, hidden="every layer counted with d_k", mistake=ALL_D_K),
        bug("biases counted", 108, hidden="a bias counted", mistake=BIASES),
        bug("square layers", 192, hidden="d_model × d_model", mistake=SQUARE),
        bug("the sizes added", 17, hidden="the sizes added up", mistake=SIZES_ADDED),
        bug("an unexpected number", 48, hidden="is not the number of parameters"),
        *not_a_number(96),
    ]
