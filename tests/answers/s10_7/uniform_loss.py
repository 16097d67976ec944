"""uniform_loss (a prediction): right answers written differently, and expected wrong ones."""

import math

from course.visible.s10_7.uniform_loss import BITS, PERPLEXITY, PROBABILITY, SMOOTHING_LOWERS
from tests.answers import bug, not_a_number, right

EXERCISE = "uniform_loss"


def answers(solution):
    return [
        right("solution", solution["uniform_loss"]),
        right("every decimal", math.log(60)),
        right("near enough: rounds to one decimal", 4.09),
        bug("in bits", math.log2(60), hidden="in bits", mistake=BITS),
        bug("the perplexity", 60, hidden="perplexity of that model", mistake=PERPLEXITY),
        bug("the probability of a token", 1 / 60, hidden="the probability the model gives",
            mistake=PROBABILITY),
        bug("a perfect model's loss", 0, hidden="the probability the model gives", mistake=PROBABILITY),
        bug("smoothing taken off", 0.9 * math.log(60), hidden="as if label smoothing",
            mistake=SMOOTHING_LOWERS),
        bug("an unexpected number", 2.0, hidden="is not the loss in nats"),
        *not_a_number(4.1),
    ]
