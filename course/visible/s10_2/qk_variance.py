"""``qk_variance``: predict the variance of q·k before the derivation and the experiment show it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

STANDARD_DEVIATION = Mistake(
    "standard_deviation", "the standard deviation of q·k, the square root of its variance",
    "The question asks for the variance: the mean of (q·k)², since q·k has mean 0.")
SCALED = Mistake(
    "scaled", "the variance after dividing by sqrt(d_k), which is what the scaling achieves",
    "The question is about the raw dot product, before any scaling.")
SQUARED = Mistake(
    "squared", "d_k multiplied by itself",
    "Each of the d_k products q_i k_i has variance 1; for independent terms, variances add up.")
MEAN = Mistake(
    "mean", "the mean of q·k (it is 0: positive and negative products cancel on average)",
    "The variance measures the spread around that mean: how large q·k typically gets.")


class QkVariance(Prediction):
    name = "qk_variance"
    question = "the variance of q·k for d_k = 64 entries of mean 0 and variance 1"
    answer = "1a0f3fbd4a408387"
    wrong = {"7b8a25dfda59a706": STANDARD_DEVIATION, "d3bd2905ebdfa5f5": SCALED,
             "211c89f59d247a85": SQUARED, "13e8e41c8b21dac9": MEAN}
    shown_by = "the derivation and your experiment below"


check_qk_variance = prediction_check(
    QkVariance, "The derivation below says why, and your experiment will measure it.")
