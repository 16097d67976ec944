"""Does the student release hold what learners need and nothing of the instructor's?"""

import json

import pytest

from grader.errors import PublishError
from grader.paths import course_root
from grader.publish import bundle

ROOT = course_root()
RELEASE = ROOT / "notebooks"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return bundle.build_student_bundle(tmp_path_factory.mktemp("student") / "release")


def test_bundle_has_what_learners_need(release):
    """Are the notebooks, helpers, data, environment and README all there?"""
    for name in ("notebooks", "course", "data", "README.md", "pyproject.toml", "postBuild"):
        assert (release / name).exists(), name
    shipped = sorted(p.relative_to(release / "notebooks") for p in (release / "notebooks").glob("*/*.ipynb"))
    assert shipped == sorted(p.relative_to(RELEASE) for p in RELEASE.glob("*/*.ipynb"))


def test_bundle_leaks_nothing(release):
    """Is there no solution, hidden test, check code or instructor folder in the bundle?"""
    assert bundle.find_leaks(release, ROOT / "solutions") == []
    assert not (release / "grader").exists() and not (release / "solutions").exists()
    text = "\n".join(p.read_text(errors="replace") for p in release.rglob("*") if p.is_file()
                     and p.suffix in {".py", ".ipynb", ".md"})
    assert "HIDDEN TESTS" not in text and "grader.checks" not in text


def test_leak_detector_catches_a_planted_solution(release, tmp_path):
    """Would a solution line pasted into a learner notebook be caught (testing the test)?"""
    notebook = next((release / "notebooks").glob("10.2*/*.ipynb"))
    nb = json.loads(notebook.read_text())
    planted = dict(nb)
    code = next(c for c in planted["cells"]
                if c["cell_type"] == "code" and "NotImplementedError" in "".join(c["source"]))
    original = code["source"]
    code["source"] = ["scores = scores.masked_fill(~mask, float(\"-inf\"))  # blocked pairs get weight 0\n"]
    notebook.write_text(json.dumps(planted))
    try:
        leaks = bundle.find_leaks(release, ROOT / "solutions")
        assert any("solution line" in leak for leak in leaks)
    finally:
        code["source"] = original
        notebook.write_text(json.dumps(planted))


def test_badges_point_at_real_notebooks(release):
    """Does every Colab badge in the learner README point at a notebook that exists?"""
    readme = (release / "README.md").read_text()
    assert "mybinder.org/v2/gh/" in readme
    for path in RELEASE.glob("*/*.ipynb"):
        assert f"blob/main/notebooks/{path.parent.name}/{path.name}" in readme


def test_refuses_to_overwrite(release):
    """Does building into a non-empty folder stop instead of overwriting it?"""
    with pytest.raises(PublishError, match="not empty"):
        bundle.build_student_bundle(release)


def test_readme_badges_match_the_notebooks():
    """Does the README carry a Binder badge and one Colab badge per learner notebook?"""
    readme = (ROOT / "README.md").read_text()
    assert bundle.badges(bundle.DEFAULT_REPOSITORY) in readme, (
        "README badges are stale: paste grader.publish.bundle.badges(DEFAULT_REPOSITORY) into README.md")
