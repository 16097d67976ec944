"""Hidden checks of 10.1 Self-attention: Q, K, V, one module per exercise.

References: ``nn.Linear(bias=False)`` with the learner's (seeded) weights.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
