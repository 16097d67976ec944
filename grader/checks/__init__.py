"""Hidden checks, one module per section; ``EXERCISES`` finds any exercise by name."""

from grader.checks import s10_1, s10_2, s10_3

SECTIONS = {"10.1": s10_1, "10.2": s10_2, "10.3": s10_3}
EXERCISES = {exercise.name: exercise for module in SECTIONS.values() for exercise in module.EXERCISES}
