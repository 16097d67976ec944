"""``qkv_parameters``: predict how many numbers QKVProjection(8, 3, 6) learns, before the cell
below counts them."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

ALL_D_K = Mistake(
    "all_d_k", "every layer counted with d_k outputs",
    "w_v has its own width: it maps d_model features to d_v, not to d_k.")
BIASES = Mistake(
    "biases", "a bias counted in every layer",
    "The three layers are created with bias=False: each holds a weight matrix and nothing else.")
SQUARE = Mistake(
    "square", "three d_model × d_model layers",
    "Each layer maps d_model features to its own width (d_k or d_v), not back to d_model.")
SIZES_ADDED = Mistake(
    "sizes_added", "the sizes added up (d_model + d_k + d_v)",
    "A layer from a features to b features holds an (b, a) weight matrix: a · b numbers.")


class QkvParameters(Prediction):
    name = "qkv_parameters"
    question = "the number of parameters of QKVProjection(d_model=8, d_k=3, d_v=6)"
    answer = "01114e109bf10d89"
    wrong = {"c9294ac8c7bda9a0": ALL_D_K, "35f205c447473186": BIASES, "5eecc7d5baffe68d": SQUARE,
             "27bc5f0a8a4398e6": SIZES_ADDED}
    shown_by = "the cell below, which counts them,"


check_qkv_parameters = prediction_check(QkvParameters, "The cell below counts them layer by layer.")
