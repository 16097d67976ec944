"""Does ruff find nothing to complain about in the code and the notebooks?"""

import subprocess

from ruff.__main__ import find_ruff_bin

from grader.paths import course_root

ROOT = course_root()


def test_ruff_check_passes():
    """Is `ruff check` (configured in pyproject.toml, notebooks included) clean?"""
    result = subprocess.run([find_ruff_bin(), "check", "--output-format", "concise", "."],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
