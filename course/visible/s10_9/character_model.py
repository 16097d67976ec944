"""``character_model``: predict how the character model ranks on loss per token and on bits per sentence,
before the experiment's table shows both."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

ONE_RANKING = Mistake(
    "one_ranking", "one ranking for both figures, as if a lower loss per token meant a cheaper sentence",
    "A sentence costs its tokens' bits added up: the bits per token times the number of tokens, and a "
    "sentence of characters has several times the tokens of the same sentence in words.")
HARD_TOKENS = Mistake(
    "hard_tokens", "character tokens taken for hard ones to predict",
    "Once a word's first letters are read, its next letter is nearly certain: most character tokens are "
    "easy, so the loss per token is small. Which way does the number of tokens per sentence push the sum?")
REVERSED = Mistake(
    "reversed", "both figures the wrong way round",
    "Most character tokens are easy to predict (the rest of a word once its first letters are read), and a "
    "sentence of characters has several times the tokens of the same sentence in words.")


class CharacterModel(Prediction):
    name = "character_model"
    question = "how the character model ranks on bits per token and on bits per sentence"
    choices = ("a", "b", "c", "d")
    answer = "1c8a3192b5da6545"
    wrong = {"2817547186e032a1": ONE_RANKING, "ad46923b74d04b5f": HARD_TOKENS,
             "694dc07f12388cd3": REVERSED}
    shown_by = "the experiment's table"


check_character_model = prediction_check(
    CharacterModel, "The table below gives both figures, and the lines under it why they disagree.")
