"""Hidden check of the ``character_model`` prediction: the visible question, its answer recorded."""

from course.visible.s10_9.character_model import CharacterModel
from grader.checks.exercise import GradedExercise, registered


@registered
class GradedCharacterModel(CharacterModel, GradedExercise):
    """Nothing to add but the record: the answer is judged again in a clean process."""
