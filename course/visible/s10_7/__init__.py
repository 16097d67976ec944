"""Visible checks of 10.7 Beyond the lesson: a GPT from your own blocks, one module per exercise.

References: ``F.cross_entropy(ignore_index, label_smoothing)``, the contract's schedule formula,
``nn.RMSNorm``, ``nn.TransformerEncoderLayer(norm_first=True)`` holding the GPT's weights, the
contract's top-k / top-p rule, and the contract's sampling loop on a stand-in model.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
