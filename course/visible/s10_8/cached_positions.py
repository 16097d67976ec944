"""``cached_positions``: predict how many positions the cached GPT's first block processes at one
step, before the cell that counts them."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

WITHOUT_CACHE = Mistake(
    "without_cache", "the count without the cache: every token of every sentence, again",
    "With the cache the keys and values of the earlier tokens are read, not recomputed: only the newest "
    "token of each sentence goes through the layer.")
ONE_SENTENCE = Mistake(
    "one_sentence_uncached", "the tokens of one sentence, without the cache",
    "A count is rows times positions: the 8 sentences go through the layer together, and with the cache "
    "each of them brings only its newest token.")
ONE_ROW = Mistake(
    "one_row", "one position: the newest token of a single sentence",
    "The batch holds 8 sentences, and each brings its newest token: count them all.")
WINDOW = Mistake(
    "window", "the whole window of every sentence, which happens only once the text is longer than max_len",
    "At the 4th step the text is shorter than max_len, so the cache is in use.")


class CachedPositions(Prediction):
    name = "cached_positions"
    question = ("the number of positions the cached GPT's first block processes at the 4th step of "
                "8 sentences")
    answer = "dddd96dacc460e45"
    wrong = {"685e6351d1b13c88": WITHOUT_CACHE, "d82083b9eb75cbd6": ONE_SENTENCE,
             "9ca82f9ad10eb2d3": ONE_ROW, "cf6a08d2580540a3": WINDOW}
    shown_by = "the next cell's counts"


check_cached_positions = prediction_check(
    CachedPositions, "The next cell counts them, step by step, with and without the cache.")
