"""The visible checks of every exercise, one module per section (``s10_1`` ... ``s10_6``).

Each test cell of a notebook calls one of them right after the exercise, for example
``visible.check_softmax(softmax)``. They run in well under a second, compare with PyTorch
(copied weights, several shapes, masks and options) and name the likely mistake when an
answer differs, using PyTorch's own functions with other arguments to recognise it.
Grading runs more cases than these (see ``course.progress.GRADING_ONLY``).
"""
