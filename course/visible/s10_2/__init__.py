"""Visible checks of 10.2 Scaled dot-product attention, one module per exercise.

References: ``torch.softmax``; ``F.scaled_dot_product_attention`` for the output, and the
same function with the identity matrix as values for the weights (softmax(S) @ I = softmax(S));
theory (a variance of d_k, or 1 once scaled) for the sqrt(d_k) experiment.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
