"""``training_flops``: predict a training step's FLOPs per weight and token before the count shows them."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

FORWARD_ONLY = Mistake(
    "forward only", "the forward pass alone",
    "That is the forward pass: one multiply-add per weight and per token. Training also runs the "
    "backward pass, and it is not free.")
ONE_BACKWARD_PRODUCT = Mistake(
    "one backward product", "a backward pass that costs what the forward pass costs",
    "The backward pass of a linear layer does two products, each the size of the forward one: "
    "the gradient for the layer's input (to go on to the layers below) and the gradient for its weight.")
MULTIPLY_ADDS = Mistake(
    "multiply-adds", "multiply-adds, not FLOPs",
    "You counted multiply-adds; each is two floating-point operations, a multiplication and an addition.")


class TrainingFlops(Prediction):
    name = "training_flops"
    question = "the FLOPs of a training step per weight and per token"
    answer = "e388ab182a557e2b"
    wrong = {"a249f7fb206e2b96": FORWARD_ONLY, "52898ca310ef5b12": ONE_BACKWARD_PRODUCT,
             "af2ad512339ee5c9": MULTIPLY_ADDS}
    shown_by = "the count below"


check_training_flops = prediction_check(TrainingFlops, "The count below measures both passes.")
