"""Hidden checks of 10.6 The encoder-decoder architecture, one module per exercise.

References:

* ``causal_mask``: ``torch.ones(n, n, dtype=torch.bool).tril()``.
* ``padding_mask``: ``(tokens != pad_id)`` viewed as ``(B, 1, 1, n)``.
* ``DecoderBlock``: ``nn.TransformerDecoderLayer(batch_first=True)`` with the learner's
  (seeded) weights copied in and the masks converted to its polarity (True = blocked).
* ``Transformer``: ``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` built from copied
  layers, with the notebook's conventions around them: embeddings plus the sinusoidal
  table (not scaled by sqrt(d_model)), a final LayerNorm after each stack **only when
  norm_first=True** (a post-norm block already ends with one), a final ``nn.Linear``.
  Causality and padding are also checked as properties of the learner's own model.
* ``greedy_decode``: a scripted stand-in model (:mod:`course.checking.standins`).
* ``train_step``: two calls on a stand-in translator, against the contract's step done with
  ``F.cross_entropy`` and ``clip_grad_norm_`` on the same model built again from its seed.
* ``greedy_decode_cached`` and ``beam_search``: greedy decoding and the contract's search on
  the notebook's Transformer built by the check (:mod:`.models`) and on scripted tables.

Every wrong-answer diagnosis comes from a functional model with one mistake switched on.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
