"""Visible checks of 10.3 Multi-head attention, one module per exercise.

``split_heads`` and ``merge_heads`` are checked by what they must do to every feature block
(head i holds features i·d_h to (i+1)·d_h - 1 of every token, :mod:`.heads`);
``MultiHeadAttention`` against ``nn.MultiheadAttention(batch_first=True)`` holding the
learner's weights.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
