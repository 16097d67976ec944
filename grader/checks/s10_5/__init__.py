"""Hidden checks of 10.5 The Transformer block, one module per exercise.

References: ``nn.Linear`` + ``nn.ReLU``/``nn.GELU`` for ``FeedForward``;
``nn.TransformerEncoderLayer(batch_first=True, dropout=0.0)`` for ``TransformerBlock``, with the
learner's (seeded) weights copied in. Every parameter, LayerNorm weights and biases included, gets
random values, so a swapped, shared or missing LayerNorm cannot hide behind weight 1 and bias 0.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
