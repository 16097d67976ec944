"""Hidden checks of 10.9 Beyond the lesson: tokens, from characters to words with byte-pair merges in
between, one module per exercise.

References: the contract's trainer (a full recount of the pairs every round) and encoder (the merges
in their learned order), with switches that reproduce each known mistake; more corpora of the
visible kinds, the course's own French and English among them; the same for the byte-level
trainer, encoder and decoder (GPT-2's pre-tokens, CS336's tie rule).
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
