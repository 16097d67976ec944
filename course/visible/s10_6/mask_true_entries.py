"""``mask_true_entries``: predict how many pairs the combined mask lets attend, before the figure
shows it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

PADDING_FORGOTTEN = Mistake(
    "padding_forgotten", "the causal mask alone, as if the padding mask hid nothing",
    "The padding mask is False at the two <pad> keys: the rows that the causal mask lets reach "
    "them (the last two) lose them.")
PADDING_QUERIES = Mistake(
    "padding_queries", "a count that also blocks the rows of the padding queries",
    "The padding mask has shape (B, 1, 1, n): one entry per key, the same for every query. It hides "
    "the padding keys from every row; the rows of the padding positions still read the real words.")
NO_DIAGONAL = Mistake(
    "no_diagonal", "a count without the diagonal, as if a word could not read itself",
    "The causal mask is True on and below the diagonal: query i may attend to keys 0 .. i, itself "
    "included.")


class MaskTrueEntries(Prediction):
    name = "mask_true_entries"
    question = ("the number of True entries of padding_mask(tgt, PAD) & causal_mask(5) for sentence 1, "
                "<bos> hello <eos> <pad> <pad>")
    answer = "5b67b6c89306af84"
    wrong = {"b44e6eff30b11a89": PADDING_FORGOTTEN, "1f8d3db3af5b71aa": PADDING_QUERIES,
             "3739019609889a19": NO_DIAGONAL}
    shown_by = "the figure below"


check_mask_true_entries = prediction_check(
    MaskTrueEntries, "The figure below draws it; the line under it counts it.")
