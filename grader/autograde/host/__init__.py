"""The host: the process that runs ``python -m grader autograde`` and writes ``OUT``."""
