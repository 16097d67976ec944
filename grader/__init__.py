"""Grading for the Transformer course.

* ``grader.checks``: the hidden checks, run inside the learner's kernel by the hidden test
  cells (kernel side; imports nothing of the rest of this package);
* ``grader.autograde``: grading a class with nbgrader, in the grader's own processes
  (host side);
* ``grader.publish``: generating the learner notebooks and the student release;
* ``grader.paths``, ``grader.errors``: where the course is, and the errors a person can fix;
* ``python -m grader``: the command line over all of it.
"""
