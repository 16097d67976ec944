"""Right answers and planted bugs of 10.5, one module per exercise.

The blocks build on the notebook's given MultiHeadAttention and its FeedForward: :func:`given`
makes them globals of the answers module that calls it.
"""


def given(module_globals: dict, solution: dict) -> None:
    """The notebook's MultiHeadAttention and FeedForward (as FeedForwardSolution), as globals."""
    module_globals.update(MultiHeadAttention=solution["MultiHeadAttention"],
                          FeedForwardSolution=solution["FeedForward"])
