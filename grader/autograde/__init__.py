"""Grading a whole class with nbgrader, outside the learners' kernels, by process:

* ``host/``: the grader's own process (``python -m grader autograde``): finds the
  submissions, skips what an earlier run graded from the same inputs, decides the
  sandbox, drives the pool of workers, and is the one writer of ``OUT``;
* ``worker/``: the grading workers, one submission at a time with nbgrader's own
  converters and the robust preprocessors (``worker/preprocessors/``, one module each);
  they never run learner code, so they also verify the integrity records;
* ``sandbox/``: the launcher every kernel starts through, and the settings it reads;
* ``messages.py``: what crosses the pipe between host and worker.

The result of one submission and its status (``grader/results.py``) sits beside the
commands that read it (merge, regrade, report, export, gradebook) and imports nothing of
the grader, so every arrow to it points one way.

Nothing here is imported by the hidden checks (``grader.checks``), which run inside the
learner's kernel; the arrow goes one way. This package imports nothing at import time, so
the sandbox launcher stays light.
"""
