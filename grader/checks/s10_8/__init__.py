"""Hidden checks of 10.8 Beyond the lesson: decoding, with a cache, a beam and samples, one module
per exercise.

References:

* ``greedy_decode_cached`` and ``beam_search``: greedy decoding and the contract's search on
  10.6's Transformer built by the check (:mod:`.models`) and on scripted tables.
* ``next_token_probs`` and ``sample``: the contract's top-k / top-p rule and sampling loop.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
