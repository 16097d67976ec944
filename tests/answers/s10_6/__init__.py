"""Right answers and planted bugs of 10.6, one module per exercise.

Bugs that build on the notebook's given code (MultiHeadAttention, FeedForward, ...) or on
earlier answers of the notebook take them from the solution's namespace: :func:`given` makes
them the globals of the answers module that calls it.
"""

GIVEN = ("MultiHeadAttention", "FeedForward", "TransformerBlock", "PositionalEncoding",
         "causal_mask", "padding_mask", "DecoderBlock")


def given(module_globals: dict, solution: dict) -> None:
    """The notebook's given classes and earlier answers, as globals of an answers module."""
    module_globals.update({name: solution[name] for name in GIVEN})
