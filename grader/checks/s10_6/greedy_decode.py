"""Hidden check of ``greedy_decode`` (defined in its visible module): its cases, re-seeded, on the scripted
stand-in model (:class:`course.visible.s10_6.greedy_decode.MaskedScriptedModel`) and one more with
another pad_id, on the grading device."""

from course.visible.s10_6.greedy_decode import GreedyDecode, _case
from grader.checks.exercise import GradedExercise, registered
from grader.checks.shared_references import reference_padding_mask

MORE = [_case("model.pad_id=9, three sentences, two of them padded", 746,
              [[1, 4, 2], [1, 6, 7, 8, 2], [1, 9, 9, 2], [1, 5, 2]], 1, 2, 9, "another pad_id", pad=9)]


@registered
class GradedGreedyDecode(GreedyDecode, GradedExercise):
    builds_on = {"padding_mask": reference_padding_mask}  # grading's own stand-in (course.checking.pieces)
    own_cases = MORE
