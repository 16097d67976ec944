"""``cached_positions``: predict how many positions the cached GPT's first block processes at a step
after the window has slid, before the cell that counts them."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

STILL_CACHED = Mistake(
    "still_cached", "one new position for each of the 8 sentences, as if the cache still held the others",
    "Past max_len the model reads the last max_len tokens: every token has moved one position to the left, "
    "so its key changes with its position, and the input is not the previous one plus a token. What does "
    "KVCachedGPT do with any other input?")
WHOLE_TEXT = Mistake(
    "whole_text", "every token of every sentence, all 10 of them",
    "The GPT has no position beyond max_len: sample feeds it the last max_len tokens of each sentence.")
ONE_SENTENCE = Mistake(
    "one_sentence", "the tokens of one sentence",
    "A count is rows times positions: the 8 sentences go through the layer together.")
ONE_ROW = Mistake(
    "one_row", "one position: the newest token of a single sentence",
    "The batch holds 8 sentences, and past max_len the cache no longer saves the older positions.")


class CachedPositions(Prediction):
    name = "cached_positions"
    question = ("the number of positions the cached GPT's first block processes at the 10th step of "
                "8 sentences, past max_len")
    answer = "cf6a08d2580540a3"
    wrong = {"dddd96dacc460e45": STILL_CACHED, "fb1bd5b7c3d32f80": WHOLE_TEXT,
             "080df5ff71cf5a3e": ONE_SENTENCE, "9ca82f9ad10eb2d3": ONE_ROW}
    shown_by = "the next cell's counts"


check_cached_positions = prediction_check(
    CachedPositions, "The next cell counts them, step by step, with and without the cache.")
