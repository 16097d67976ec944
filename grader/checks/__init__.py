"""Hidden checks, one module per section; ``EXERCISES`` finds any exercise by name."""

from grader.checks import s10_1, s10_2, s10_3, s10_4, s10_5, s10_6

SECTIONS = {"10.1": s10_1, "10.2": s10_2, "10.3": s10_3, "10.4": s10_4, "10.5": s10_5, "10.6": s10_6}
EXERCISES = {exercise.name: exercise for module in SECTIONS.values() for exercise in module.EXERCISES}
