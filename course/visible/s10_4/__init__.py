"""Visible checks of 10.4 Positional encoding, one module per exercise.

PyTorch has no sinusoidal encoding, so the reference is the formula of the notebook, evaluated
entry by entry with Python's ``math`` at sampled entries. The tolerance grows with the largest
position, as in grading (float32 angles carry rounding: ``compare_outputs(..., atol=...)``).
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
