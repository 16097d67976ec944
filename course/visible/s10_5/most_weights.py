"""``most_weights``: predict which sub-layer holds most of a block's weights before the count shows it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

ATTENTION = Mistake(
    "attention", "attention, for its four matrices against the feed-forward network's two",
    "Count sizes, not matrices: W_Q, W_K, W_V and W_O are d_model x d_model each, but W_1 and W_2 are "
    "d_model x d_ff each, four times larger at d_ff = 4 d_model.")
EQUAL = Mistake(
    "equal", "about equal, as if all six matrices had the same size",
    "W_1 and W_2 are d_model x d_ff, not d_model x d_model: the two sub-layers would be equal only at "
    "d_ff = 2 d_model.")


class MostWeights(Prediction):
    name = "most_weights"
    question = "the sub-layer with most of the block's weights at d_ff = 4 d_model"
    choices = ("a", "b", "c")
    answer = "e1c12c89dd277f41"
    wrong = {"7d751288be755cf6": ATTENTION, "0ff13872051fc938": EQUAL}
    shown_by = "the count below"


check_most_weights = prediction_check(MostWeights, "The count below gives the numbers.")
