"""The grading workers: processes the host forks once and feeds one submission at a time."""
