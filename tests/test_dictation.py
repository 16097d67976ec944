"""Do the notebooks state contracts and leave the how to folded hints, and does each ask for a
prediction before a demonstration? (The messages' side, no answer line in a failure, is held by
tests/test_answers.py and tests/test_visible.py over every planted bug.)"""

from __future__ import annotations

import nbformat
import pytest

from course import checking
from grader.checks import EXERCISES
from tests import dictation
from tests.answers import declared_sections

SECTIONS = list(declared_sections())


@pytest.mark.parametrize("section", SECTIONS)
def test_the_prose_dictates_at_most_a_fifth_of_an_answer(section):
    """At most 20 % of an exercise's answer lines stand verbatim in the notebook's prose outside
    the <details> folds."""
    over = {name: said for name, (lines, said) in dictation.dictated(section).items()
            if lines and len(said) / len(lines) > dictation.MAX_SHARE}
    assert not over, over


@pytest.mark.parametrize("section", SECTIONS)
def test_every_notebook_asks_for_a_prediction(section):
    """Each notebook has a graded prediction (its test cell's grade id starts with predict_)."""
    predictions = [name for name in dictation.answer_lines(section)
                   if isinstance(EXERCISES.get(name), checking.Prediction)]
    assert predictions, f"{section} asks for no prediction"


def test_the_measure_sees_a_dictated_line(tmp_path, monkeypatch):
    """Planted: prose that spells out an answer line is counted; the same line inside a fold is not."""
    line = "scores = Q @ K.transpose(-2, -1) / math.sqrt(d_k)"
    folded = f"<details><summary>Hint</summary>\n\n`{line}`\n\n</details>"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"Compute `{line}`."),
                                         nbformat.v4.new_markdown_cell(folded)])
    monkeypatch.setattr(dictation, "notebook_path", lambda *a, **k: tmp_path / "nb.ipynb")
    nbformat.write(nb, tmp_path / "nb.ipynb")
    assert dictation.squeeze(line) in dictation.learner_prose("10.2")
    nb.cells = nb.cells[1:]
    nbformat.write(nb, tmp_path / "nb.ipynb")
    assert dictation.squeeze(line) not in dictation.learner_prose("10.2")
