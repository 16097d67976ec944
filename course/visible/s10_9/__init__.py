"""Visible checks of 10.9 Beyond the lesson: tokens, from characters to words with byte-pair merges in
between, one module per exercise.

References: the contract's merges and tokens on corpora worked by hand and on seeded ones, shipped as
data (``EXPECTED``, written by the hidden checks' ``snapshot()``): nothing here trains or encodes.
"""

from course.checking import gather_checks

globals().update(gather_checks(__name__))
