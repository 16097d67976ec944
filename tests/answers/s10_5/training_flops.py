"""training_flops (a prediction): the right number written differently, and the expected wrong ones."""

from course.visible.s10_5.training_flops import FORWARD_ONLY, MULTIPLY_ADDS, ONE_BACKWARD_PRODUCT
from tests.answers import bug, not_a_number, right

EXERCISE = "training_flops"


def answers(solution):
    return [
        right("solution", solution["training_flops"]),
        right("a float", 6.2),
        bug("forward only", 2, hidden="That is the forward pass", mistake=FORWARD_ONLY),
        bug("one backward product", 4, hidden="two products, each the size", mistake=ONE_BACKWARD_PRODUCT),
        bug("multiply-adds", 3, hidden="each is two floating-point", mistake=MULTIPLY_ADDS),
        bug("another number", 12, hidden="is not the FLOPs"),
        *not_a_number(6),
    ]
