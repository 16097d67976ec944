"""mask_true_entries (a prediction): right answers written differently, and expected wrong ones."""

from course.visible.s10_6.mask_true_entries import NO_DIAGONAL, PADDING_FORGOTTEN, PADDING_QUERIES
from tests.answers import bug, not_a_number, right

EXERCISE = "mask_true_entries"


def answers(solution):
    return [
        right("solution", solution["mask_true_entries"]),
        right("a float", 12.0),
        right("near enough: rounds to the integer", 12.2),
        bug("the causal mask alone", 15, hidden="causal mask alone", mistake=PADDING_FORGOTTEN),
        bug("the padding queries blocked too", 6, hidden="padding queries", mistake=PADDING_QUERIES),
        bug("without the diagonal", 7, hidden="without the diagonal", mistake=NO_DIAGONAL),
        bug("an unexpected number", 25, hidden="is not the number of True entries"),
        *not_a_number(12),
    ]
