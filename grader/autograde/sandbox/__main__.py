"""``python -m grader.autograde.sandbox kernel|probe ...``: the launcher's command line."""

from grader.autograde.sandbox.launcher import main

main()
