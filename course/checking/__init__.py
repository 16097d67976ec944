"""The course's one checking toolkit: what the visible checks and the graded checks share.

The visible checks (``course.visible``, run in the test cell right after each exercise) and
the hidden checks that grade the notebooks are built from these pieces,
so a learner sees the same kind of message, worded the same way, with the same tolerances,
whichever side speaks:

- :mod:`.compare`: tolerances per dtype and device, "close", where two tensors differ;
- :mod:`.failure`: the one failure type (:class:`CheckFailure`, :class:`NotAttempted`), shown
  in Jupyter as its message alone;
- :mod:`.mistakes`: a known mistake (:class:`Mistake`, declared once per exercise) and the
  diagnosis that names it;
- :mod:`.learner`: calling learner code and checking what comes back;
- :mod:`.outputs`: seeded inputs, outputs with gradients, comparing named outputs;
- :mod:`.modules`: a learner module's layers, distinct where they must be;
- :mod:`.registry`: how an exercise's check is registered by name and found;
- :mod:`.devices`: tensors made on a fixed device, found on the CPU alone;
- :mod:`.exercise`: the one engine: an exercise's cases, run, compared, diagnosed (both sides);
- :mod:`.predict`: predict-then-run questions (a number or a choice) on the same engine;
- :mod:`.blocks`: the contract's Transformer blocks next to PyTorch's layers (weights copied in,
  masks in their polarity, dropout off in eval mode);
- :mod:`.standins`: stand-in models decoders are checked on, and the checks of their ids.
"""

from course.checking.compare import (
    VARIANCE_RTOL,
    angle_tolerance,
    close,
    close_score,
    describe_difference,
    tolerance,
)
from course.checking.devices import check_unplaced_tensors
from course.checking.exercise import Case, Exercise
from course.checking.failure import CheckFailure, NotAttempted, explain_exception
from course.checking.learner import (
    call_learner,
    expect_pair,
    expect_shape,
    expect_tensor,
    expect_tuple,
    expect_value_error,
)
from course.checking.mistakes import Mistake, Variants, diagnose
from course.checking.modules import expect_distinct, expect_linear_layers
from course.checking.outputs import (
    Outputs,
    compare_outputs,
    generator,
    randn,
    seeded,
    single_thread,
    with_gradients,
)
from course.checking.predict import Prediction, digest, prediction_check
from course.checking.registry import gather_checks, passed, visible_check

__all__ = [
    "VARIANCE_RTOL", "Case", "CheckFailure", "Exercise", "Mistake", "NotAttempted", "Outputs", "Prediction",
    "Variants", "angle_tolerance",
    "call_learner", "check_unplaced_tensors", "close", "close_score", "compare_outputs",
    "describe_difference", "diagnose", "digest",
    "expect_distinct", "expect_linear_layers", "expect_pair", "expect_shape", "expect_tensor", "expect_tuple",
    "expect_value_error",
    "explain_exception", "gather_checks", "generator", "passed", "prediction_check", "randn", "seeded",
    "single_thread",
    "tolerance", "visible_check", "with_gradients",
]
