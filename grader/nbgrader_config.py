"""nbgrader configuration of the course (loaded by the root nbgrader_config.py)."""

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "transformer-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# What a learner sees in place of a solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# ... except in a prediction's answer cell, which keeps only its `<name> = None` line
# (grader/publish/stubs.py). An nbgrader without the course's grader package (a learner's, or
# an exchange-only instructor's: release, fetch, submit) generates nothing and skips this.
try:
    from grader.publish.stubs import generate_preprocessors
except ModuleNotFoundError:
    pass
else:
    c.GenerateAssignment.preprocessors = generate_preprocessors()

# Autograding: a generous per-cell limit; `python -m grader autograde --timeout` overrides it.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# `nbgrader export` by the course's rule (grader export's): a flagged or error submission not
# yet graded by a person in formgrader, or none at all, has an empty score, not its points or 0.
c.ExportApp.plugin_class = "grader.gradebook.CourseCsvExport"
