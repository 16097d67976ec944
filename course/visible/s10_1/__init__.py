"""Visible checks of 10.1 Self-attention: queries, keys and values, one module per exercise.

References: ``nn.Linear(d, ·, bias=False)`` layers holding the learner's weights.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
