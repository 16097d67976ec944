"""Visible checks of 10.5 The Transformer block, one module per exercise.

References: ``nn.Linear`` and ``nn.ReLU``/``nn.GELU`` for ``FeedForward``;
``nn.TransformerEncoderLayer(batch_first=True, dropout=0.0)`` holding the learner's weights for
``TransformerBlock`` (:mod:`course.checking.blocks`). Every parameter, LayerNorms included, gets
seeded random values, so swapped or shared norms cannot hide behind weight 1 and bias 0.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
