"""Hidden checks of 10.2 Scaled dot-product attention, one module per exercise.

References: ``torch.softmax``; ``F.scaled_dot_product_attention`` for the output and the
softmax of the masked, scaled scores for the weights; theory for the sqrt(d_k) experiment.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
