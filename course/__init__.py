"""Helpers every notebook of the Transformer course imports.

Learner-visible and shipped with the notebooks: the running example, device choice,
figures and the instant (visible) checks. The hidden checks live in ``grader``.
"""

from course.device import get_device
from course.example import TOKENS, example_embeddings

__all__ = ["TOKENS", "example_embeddings", "get_device"]
