"""Visible checks of 10.8 Beyond the lesson: decoding, with a cache, a beam and samples, one module
per exercise.

References: greedy decoding without a cache and a teacher-forced pass of the stand-in translator
(:mod:`course.checking.standins`) for ``greedy_decode_cached``; the contract's search on scripted
tables for ``beam_search``; snapshot probabilities and PyTorch's own functions for
``next_token_probs``; the contract's sampling loop on a stand-in model for ``sample``;
PyTorch's attention with ``enable_gqa`` for ``grouped_query_attention``.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
