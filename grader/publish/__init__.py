"""What the course gives learners: the generated notebooks and the student release.

``generate`` runs nbgrader's ``generate_assignment`` to make ``notebooks/`` from
``solutions/``; ``bundle`` builds the public student repository and proves that no
solution, hidden test or grading code is in it.
"""
