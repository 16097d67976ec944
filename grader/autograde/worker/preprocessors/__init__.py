"""nbgrader's preprocessors, made robust for a whole class: one module each.

Swapped in through configuration (:func:`grader.autograde.worker.nbgrader_runs.course_config`):

* :mod:`.restore_cells` (an ``OverwriteCells``): puts back test cells that were deleted or
  lost their nbgrader metadata, and repairs edited metadata, before nbgrader restores the
  hidden tests from the instructor source;
* :mod:`.resilient_execute` (an ``Execute``): a cell that kills the kernel (``os._exit``,
  a segfault) or ignores the timeout's interrupt is marked with an error, and the rest of
  the notebook runs in a fresh kernel after the earlier cells are replayed; an output
  flood is cut off while it arrives;
* :mod:`.save_auto_grades`: warnings on stderr cost no points (stock nbgrader gives a
  grade cell 0 when it wrote anything to stderr);
* :mod:`.mark_duplicates`: a ``DeduplicateIds`` that marks the copies it demotes.

The marks they leave in cell metadata and the error outputs they add (:mod:`.cell_marks`) are
read back by :mod:`grader.autograde.worker.cell_findings` for the grader's notes.
"""
