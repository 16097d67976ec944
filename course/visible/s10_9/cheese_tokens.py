"""``cheese_tokens``: predict how many tokens the word cheese is with no merges, before the cells show it."""

from __future__ import annotations

from course.checking import Mistake, Prediction, prediction_check

NO_MARKER = Mistake("no_marker", "the letters alone, without the end-of-word marker",
                    "With no merges a word is its characters followed by '</w>', a symbol of its own.")
ONE_WORD = Mistake("one_word", "one token for the word, as a word tokenizer gives",
                   "BPE starts from characters: with no merges nothing has been glued together yet.")
SENTENCE_MARKERS = Mistake("sentence_markers", "<bos> and <eos> counted with the word",
                           "<bos> and <eos> belong to the sentence, not to each word: count the word's own "
                           "tokens.")


class CheeseTokens(Prediction):
    name = "cheese_tokens"
    question = "the number of tokens of the word cheese with no merges"
    answer = "46f0488796c41d63"
    wrong = {"a9557e3f0df1647c": NO_MARKER, "729d8e99e946bf87": ONE_WORD,
             "0227d6c0506c7427": SENTENCE_MARKERS}
    shown_by = "the cell below"


check_cheese_tokens = prediction_check(CheeseTokens, "The cell below prints the tokens.")
