"""``uniform_loss``: predict the loss of a model that knows nothing, before the cell computes it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

BITS = Mistake(
    "bits", "the loss in bits (a logarithm to base 2)",
    "PyTorch's losses, and lm_loss, use the natural logarithm: the loss is in nats.")
PERPLEXITY = Mistake(
    "perplexity", "the perplexity of that model, the number of tokens it hesitates between",
    "The perplexity is exp of the loss; the question asks for the loss itself.")
PROBABILITY = Mistake(
    "probability", "the probability the model gives each token (or a perfect model's loss of 0)",
    "The loss of a position is -log of the probability given to its target, not the probability.")
SMOOTHING_LOWERS = Mistake(
    "smoothing_lowers", "(1 - 0.1) times the unsmoothed loss: as if label smoothing's share cost nothing",
    "Smoothing's share is the mean of -log p_v over the vocabulary; for a model that gives every token the "
    "same probability, that mean is the same number as the target's term.")


class UniformLoss(Prediction):
    name = "uniform_loss"
    question = ("the loss in nats, to one decimal, of a model that gives all V = 60 tokens the same logit, "
                "with label smoothing 0.1")
    digits = 1
    answer = "190070d458d12fc8"
    wrong = {"aba030c857110057": BITS, "10a562712a856a4f": PERPLEXITY, "1f198564463ddab2": PROBABILITY,
             "69b5324eb8835373": SMOOTHING_LOWERS}
    shown_by = "the next cell"


check_uniform_loss = prediction_check(
    UniformLoss, "The next cell computes it with your lm_loss, with and without smoothing.")
