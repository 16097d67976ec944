"""Hidden check of ``greedy_decode`` (defined in its visible module): its cases on the scripted
stand-in model (:class:`course.checking.standins.ScriptedModel`), on the grading device."""

from course.visible.s10_6.greedy_decode import GreedyDecode
from grader.checks.exercise import Exercise, registered


@registered
class GradedGreedyDecode(GreedyDecode, Exercise):
    pass
