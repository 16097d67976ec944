"""Hidden checks of 10.8 Beyond the lesson: decoding, with a cache, a beam and samples, one module
per exercise.

References:

* ``greedy_decode_cached``: the full decoder's greedy choices on stand-in Transformers (PyTorch's
  layers with the notebook's layout), and a cached decoder that names one cache shared by all blocks;
* ``beam_search``: the contract's search (or an exhaustive one) on scripted tables, random logits
  and stand-in Transformers.
* ``next_token_probs`` and ``sample``: the contract's top-k / top-p rule and sampling loop;
* ``grouped_query_attention``: PyTorch's attention with ``enable_gqa`` (K and V repeated in place
  on a torch without it).
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
