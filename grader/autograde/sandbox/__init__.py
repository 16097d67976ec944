"""The sandbox every kernel starts in: ``python -m grader.autograde.sandbox kernel|probe``.

Standard library only (``config``, ``launcher``): it runs before every kernel.
"""
