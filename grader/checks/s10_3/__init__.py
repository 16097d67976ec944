"""Hidden checks of 10.3 Multi-head attention, one module per exercise.

References: the head reshapes of ``grader.checks.shared_references`` for split_heads and merge_heads;
``nn.MultiheadAttention(batch_first=True)`` with the learner's (seeded) weights copied in
for MultiHeadAttention.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
