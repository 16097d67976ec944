"""Hidden checks of 10.7 Beyond the lesson: a GPT from your own blocks, one module per exercise.

References: ``F.cross_entropy``, the contract's schedule, ``nn.RMSNorm``, PyTorch's layers holding
the GPT's weights, the contract's top-k / top-p rule and sampling loop.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
