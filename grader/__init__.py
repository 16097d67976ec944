"""Grading for the Transformer course: hidden checks, integrity, and nbgrader tooling."""
