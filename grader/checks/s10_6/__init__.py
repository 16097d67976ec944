"""Hidden checks of 10.6 The encoder-decoder architecture, one module per exercise, each a short
extension of the exercise its visible module defines (:mod:`course.visible.s10_6`): more cases, the
grading device and another, no attention of PyTorch's where it is the reference."""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
