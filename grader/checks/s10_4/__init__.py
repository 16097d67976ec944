"""Hidden checks of 10.4 Positional encoding, one module per exercise.

PyTorch has no built-in sinusoidal encoding, so the reference is the formula of "Attention Is
All You Need" evaluated in float64 (:mod:`grader.checks.shared_references`), written independently of the
notebook: frequencies by ``pow``, sine and cosine interleaved by ``stack`` + ``flatten``. The
rotary embedding's reference multiplies complex numbers. Float32 answers carry rounding in the
angle ``pos * omega``, so the tolerance grows with the largest position involved
(:func:`course.checking.angle_tolerance`); every known mistake is off by far more than that.
"""

from grader.checks.exercise import check_functions, gather_exercises

EXERCISES = gather_exercises(__name__)
globals().update(check_functions(EXERCISES))
