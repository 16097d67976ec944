"""The grader's side: grading a whole class with nbgrader, outside the learners' kernels.

``run.autograde`` (behind ``python -m grader autograde``) finds the submissions
(``submissions``), skips what an earlier run graded from the same inputs
(``fingerprint``), and drives a pool of workers (``pool``, ``worker``) that grade one
notebook each (``job``) with nbgrader's own converters (``nbgrader_runs``,
``preprocessors``), every kernel in the sandbox (``sandbox``). The integrity records are
verified in the worker, a process that never ran learner code (``verify``); results go to
``OUT`` as JSON, ``grades.csv`` and feedback (``report``); sharded runs are combined by
``merge``.

Nothing here is imported by the hidden checks (``grader.checks``), which run inside the
learner's kernel; the arrow goes one way. This package imports nothing at import time, so
the sandbox launcher (``python -m grader.autograde.sandbox``) stays light.
"""
