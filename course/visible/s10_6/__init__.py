"""Visible checks of 10.6 The encoder-decoder architecture, one module per exercise.

References: ``nn.Transformer.generate_square_subsequent_mask`` for the causal mask;
``nn.TransformerDecoderLayer`` and a stack of ``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer`` holding the learner's weights (copied in) for the blocks
and the whole model, with the notebook's conventions around them (embeddings plus the
model's own positional table, not scaled; final LayerNorms only for pre-norm); stand-in
models (:mod:`course.checking.standins`) for the decoders; for ``train_step``, the contract's step
done with ``F.cross_entropy`` and ``clip_grad_norm_`` on a stand-in translator built from a seed.
Wrong variants: the same layers with other arguments (a mask left out or inverted, ``norm_first``
flipped) or their sublayers rearranged; the step with one thing done wrong.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
