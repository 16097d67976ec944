"""samples.not_for_unfinished_exercises: the errors of a learner run that blank exercises explain."""

import nbformat

from samples import not_for_unfinished_exercises


def test_errors_that_follow_from_a_blank_exercise_are_explained_down_the_notebook():
    """A blank exercise's NotImplementedError leaves the names its cell assigns (a tuple's too)
    undefined; a later cell that reads one fails with a NameError, which leaves its own names
    undefined in turn. Any other error, or a NameError of another name, is unexplained."""
    cells = ["model = Blank()\nd, n = 8, 4", "run = model.train()\nsize = n", "print(size)", "print(typo)",
             "1 / 0"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    errors = [(0, "NotImplementedError", ""), (1, "NameError", "name 'model' is not defined"),
              (2, "NameError", "name 'size' is not defined"), (3, "NameError", "name 'typo' is not defined"),
              (4, "ZeroDivisionError", "division by zero")]
    assert not_for_unfinished_exercises(nb, errors) == errors[3:]
    assert not_for_unfinished_exercises(nb, [(1, "NameError", "name 'n' is not defined")]) == \
        [(1, "NameError", "name 'n' is not defined")]  # nothing stopped before it
