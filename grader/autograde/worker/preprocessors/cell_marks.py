"""What the preprocessors leave in a graded notebook, for the worker's report to read back."""

from __future__ import annotations

import nbformat
from nbformat.notebooknode import NotebookNode

#: ``ename`` of the error outputs this module adds to cells; feedback and reports read them.
KERNEL_DIED = "KernelDied"
KERNEL_UNRESPONSIVE = "KernelUnresponsive"
NOT_RUN = "NotRun"
TIMEOUT = "CellTimeoutError"  # nbgrader's own, see Execute.error_on_timeout
OUTPUT_CUT = "[... the grader cut this output here: more than {} characters ...]\n"
RESTORED_NOTE = ("This test cell (id:{cell_id}) was missing from the submission or had lost "
                 "its metadata; the grader put it back.\n\n")


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An error output as the kernel would produce it."""
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                  traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


MARK = "course_grader"  # cell metadata this module adds, read back by the worker's report
