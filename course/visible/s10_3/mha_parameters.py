"""``mha_parameters``: predict how many numbers MultiHeadAttention(8, 4) learns, before the cell
below counts them for 1, 2, 4 and 8 heads."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

PER_HEAD = Mistake(
    "per_head", "four full d_model × d_model layers for every head",
    "The heads share the four layers: head i uses only its own block of d_k output features of w_q, "
    "w_k and w_v, so more heads means narrower heads, not more weights.")
NO_BIAS = Mistake(
    "no_bias", "the weights without the biases",
    "bias=True is the default: each of the four layers also holds d_model biases.")
NO_W_O = Mistake(
    "no_w_o", "three layers, without the output projection W_O",
    "The module holds four layers: w_q, w_k, w_v and the output mixer w_o.")
SMALL_HEADS = Mistake(
    "small_heads", "every head with its own d_k × d_k layers",
    "A head's queries are computed from all d_model features of a token, not from d_k of them: its "
    "slice of w_q is d_model × d_k.")


class MhaParameters(Prediction):
    name = "mha_parameters"
    question = "the number of parameters of MultiHeadAttention(d_model=8, num_heads=4)"
    answer = "d54408218a5fd2f7"
    wrong = {"c538cd37bee844a0": PER_HEAD, "bf7d0b6b7b101cfa": NO_BIAS, "fe345e857f24e9d8": NO_W_O,
             "e04f628e3931572c": SMALL_HEADS}
    shown_by = "the cell below, which counts them for 1, 2, 4 and 8 heads,"


check_mha_parameters = prediction_check(
    MhaParameters, "The cell below shows the count does not change with the number of heads.")
