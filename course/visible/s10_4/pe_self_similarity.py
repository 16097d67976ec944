"""``pe_self_similarity``: predict pe[0] · pe[0] at d_model = 64 before the similarity image shows it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

EVERY_COLUMN = Mistake(
    "every_column", "one for each of the 64 columns",
    "Row 0 holds sin(0) = 0 in its even columns and cos(0) = 1 in its odd ones: only half of them count.")
NORMALISED = Mistake(
    "normalised", "the encoding taken as a unit vector",
    "Each pair (sin, cos) is a point on the unit circle and adds sin² + cos² = 1; the whole row "
    "holds d_model / 2 such pairs, so it is not a unit vector.")
ZERO = Mistake(
    "zero", "sin(0) = 0 taken for every column",
    "Only the sines (even columns) are 0 at position 0; the cosines (odd columns) are cos(0) = 1.")
LENGTH = Mistake(
    "length", "the length |pe[0]| instead of the dot product",
    "The dot product of a vector with itself is its squared length, not its length.")


class PeSelfSimilarity(Prediction):
    name = "pe_self_similarity"
    question = "pe[0] · pe[0] for d_model = 64"
    answer = "be279a41137a14b5"
    wrong = {"215d6a09cd1f64ac": EVERY_COLUMN, "0adc0fff50d0b8b0": NORMALISED, "bfac4192b72e5b88": ZERO,
             "3340354c0d68b03a": LENGTH}
    shown_by = "the similarity image and the line printed under it"


check_pe_self_similarity = prediction_check(PeSelfSimilarity, "The cells below show it, at every position.")
