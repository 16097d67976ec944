"""Does the student release hold what learners need and nothing of the instructor's, week by
week, under whatever name it is published?"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import compute_checksum

from grader.__main__ import main
from grader.autograde.worker.preprocessors.restore_cells import as_released
from grader.errors import PublishError, UsageError
from grader.paths import course_root
from grader.publish import bundle, setup_cell
from grader.publish import leaks as leak_check
from grader.publish.code import code_text

ROOT = course_root()
RELEASE = ROOT / "notebooks"
SOLUTIONS = ROOT / "solutions"
OTHER, TERM = "example-org/transformer-course", "term-2027"


def shipped(release, pattern="*/*.ipynb"):
    return sorted(p.relative_to(release / "notebooks").as_posix()
                  for p in (release / "notebooks").glob(pattern))


def cell_with_source_line(path):
    cells = [c for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and setup_cell.course_source(c.source) is not None]
    assert len(cells) == 1, path
    return cells[0]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return bundle.build_student_bundle(tmp_path_factory.mktemp("student") / "release")


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    """The whole course published as another repository, on a term branch."""
    return bundle.build_student_bundle(tmp_path_factory.mktemp("renamed") / "release",
                                       repository=OTHER, branch=TERM)


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """Week 2, then week 4, published into one checkout of the student repository."""
    out = tmp_path_factory.mktemp("staged") / "student-repo"
    week2 = bundle.publish(out, through="10.2")
    snapshot = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    week4 = bundle.publish(out, through="10.4")
    return {"out": out, "week2": week2, "week4": week4, "snapshot": snapshot}


def copy_course(root):
    """What publishing reads of the course, copied to ``root``."""
    for name in ("notebooks", "solutions", "course", "data"):
        shutil.copytree(ROOT / name, root / name, ignore=bundle.IGNORED)
    for name in ("requirements.txt", "environment.yml", "postBuild"):
        shutil.copy2(ROOT / name, root / name)


# ---------------------------------------------------------------- the whole course


def test_bundle_has_what_learners_need(release):
    """Are the notebooks, helpers, data, environment and README all there?"""
    for name in ("notebooks", "course", "data/fr_en.tsv", "README.md", "pyproject.toml", "postBuild",
                 "environment.yml", "requirements.txt"):
        assert (release / name).exists(), name
    assert shipped(release) == sorted(p.relative_to(RELEASE).as_posix() for p in RELEASE.glob("*/*.ipynb"))
    helpers = sorted(p.name for p in (ROOT / "course").glob("*.py"))
    assert sorted(p.name for p in (release / "course").glob("*.py")) == helpers


def test_bundle_leaks_nothing(release):
    """Is there no solution, hidden test, check code or instructor folder in the bundle?"""
    assert leak_check.find_leaks(release, SOLUTIONS) == []
    assert not (release / "grader").exists() and not (release / "solutions").exists()
    assert not (release / "data" / "train_reference.py").exists()
    text = "\n".join(p.read_text(errors="replace") for p in release.rglob("*") if p.is_file()
                     and p.suffix in {".py", ".ipynb", ".md"})
    assert "HIDDEN TESTS" not in text and "grader.checks" not in text


def test_leak_detector_catches_a_planted_solution(release, tmp_path):
    """Would a solution line pasted into a learner notebook be caught (testing the test)?"""
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    notebook = next((copy / "notebooks").glob("10.2*/*.ipynb"))
    nb = json.loads(notebook.read_text())
    code = next(c for c in nb["cells"]
                if c["cell_type"] == "code" and "NotImplementedError" in "".join(c["source"]))
    code["source"] = ["scores = scores.masked_fill(~mask, float(\"-inf\"))  # blocked pairs get weight 0\n"]
    notebook.write_text(json.dumps(nb))
    leaks = leak_check.find_leaks(copy, SOLUTIONS)
    assert any("solution line" in leak for leak in leaks), leaks


def test_leak_detector_compares_code_not_strings(release, tmp_path):
    """An answer line copied into a shipped visible module's code is caught, whatever its comment;
    the same line quoted in another section's hint string, or in a comment, is no code and passes."""
    answer = "inverse_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)"
    assert answer in leak_check.solution_lines(next(SOLUTIONS.glob("10.7*/*.ipynb")), leak_check.DISTINCTIVE)
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    hinted = copy / "course" / "visible" / "s10_5" / "feed_forward.py"
    hinted.write_text(hinted.read_text() + f"\nHINT = ({answer!r}\n        'is not how')  # {answer}\n")
    assert leak_check.find_leaks(copy, SOLUTIONS) == []
    module = copy / "course" / "visible" / "s10_7" / "rms_norm.py"
    module.write_text(module.read_text() + f"\n\ndef planted(x, self):\n    {answer}  # a new comment\n")
    assert leak_check.find_leaks(copy, SOLUTIONS) == [
        f"course/visible/s10_7/rms_norm.py: solution line {answer!r}"]


def test_code_lines_leave_out_strings_comments_and_docstrings():
    """Only code counts: a docstring, a comment, the inside of a string are no line of code."""
    source = ('"""x = f(y)"""\ndef g(y):\n    """x = f(y)"""\n    x = f(y)  # x = f(y)\n'
              '    return ("x = f(y) "\n            "x = f(y)")\n%time g(1)\n')
    assert leak_check.code_lines(source) == {2: "def g(y):", 4: "x = f(y)", 5: 'return ("x = f(y) "',
                                          6: '"x = f(y)")', 7: "pass"}
    assert leak_check.line_key("x=f( y )  # no") == leak_check.line_key("x = f(y)") == "x = f ( y )"


def test_leak_detector_catches_a_given_cell_repeating_a_later_answer(release, tmp_path):
    """Would a given cell of 10.7 that repeats two lines of 10.8's sample answer be caught, though
    10.8 is released too (given code may carry earlier answers only)?"""
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    later = sorted(leak_check.answer_lines(next(SOLUTIONS.glob("10.8*/*.ipynb"))))
    notebook = next((copy / "notebooks").glob("10.7*/*.ipynb"))
    nb = nbformat.read(notebook, as_version=4)
    given = next(c for c in nb.cells if c.cell_type == "code" and "NotImplementedError" not in c.source)
    given.source += "\n" + "\n".join(later[:1])
    nbformat.write(nb, notebook)
    assert not leak_check.repeated_answers(notebook, {"10.8": set(later)}), "one line is no answer"
    given.source += "\n" + "\n".join(later[1:2])
    nbformat.write(nb, notebook)
    leaks = leak_check.find_leaks(copy, SOLUTIONS)
    assert any("lines of an answer still ahead" in leak for leak in leaks), leaks


def test_leak_detector_catches_instructor_files(release, tmp_path):
    """Would the training recipe, a gradebook or grading code in the bundle be caught?"""
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    shutil.copy(ROOT / "data" / "train_reference.py", copy / "data")
    (copy / "gradebook.db").write_bytes(b"")
    shutil.copytree(ROOT / "grader" / "checks", copy / "grader" / "checks")
    leaks = leak_check.find_leaks(copy, SOLUTIONS)
    for expected in ("data/train_reference.py: instructor file", "gradebook.db: instructor file",
                     "grader: instructor folder"):
        assert any(leak.startswith(expected) for leak in leaks), (expected, leaks[:5])


def test_badges_point_at_real_notebooks(release):
    """Does every Colab badge in the learner README point at a notebook that exists?"""
    readme = (release / "README.md").read_text()
    assert "mybinder.org/v2/gh/" in readme
    for path in RELEASE.glob("*/*.ipynb"):
        assert f"blob/main/notebooks/{path.parent.name}/{path.name}" in readme


def test_refuses_a_folder_that_is_not_a_release(tmp_path):
    """Does publishing into a non-empty folder that holds no release stop, writing nothing?"""
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(PublishError, match="not empty and holds no student release"):
        bundle.build_student_bundle(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_republishing_the_same_release_changes_nothing(release):
    """Is publishing the same sections again into a release a no-op?"""
    before = {p: p.read_bytes() for p in release.rglob("*") if p.is_file()}
    again = bundle.publish(release)
    assert again.added == again.updated == again.kept == []
    assert {p: p.read_bytes() for p in release.rglob("*") if p.is_file()} == before


def test_readme_badges_match_the_notebooks():
    """Does the README carry a Binder badge and one Colab badge per learner notebook?"""
    readme = (ROOT / "README.md").read_text()
    assert bundle.badges(bundle.DEFAULT_REPOSITORY) in readme, (
        "README badges are stale: paste grader.publish.bundle.badges(DEFAULT_REPOSITORY) into README.md")


# ---------------------------------------------------------------- week by week


def test_a_staged_release_holds_only_the_sections_due(staged):
    """Through 10.2: only 10.1 and 10.2, their helpers, no data, badges for those two only."""
    week2 = staged["snapshot"]
    notebooks = sorted(p for p in week2 if p.startswith("notebooks/"))
    assert [p.split("/")[1] for p in notebooks] == ["10.1-self-attention",
                                                    "10.2-scaled-dot-product-attention"]
    assert not any(p.startswith("data/") for p in week2), "10.1-10.2 use no data"
    helpers = sorted(p for p in week2 if p.startswith("course/"))
    assert "course/translation.py" not in helpers and "course/figures_block.py" not in helpers
    assert {"course/__init__.py", "course/checking/__init__.py", "course/plotting.py"} <= set(helpers)
    # a section's visible checks are found at import time, one module per exercise: all shipped
    assert {"course/visible/s10_1/qkv_projections.py", "course/visible/s10_2/softmax.py"} <= set(helpers)
    assert not any(p.startswith("course/visible/s10_3") for p in helpers)
    readme = week2["README.md"].decode()
    assert readme.count("colab-badge.svg") == 2 and "10.3" not in readme
    assert json.loads(week2[bundle.RELEASE_FILE])["through"] == "10.2"


def test_a_later_release_adds_and_changes_no_notebook(staged):
    """Through 10.4 into the same checkout: 10.3 and 10.4 added, 10.1 and 10.2 byte for byte
    what learners already have, the git checkout left alone, the README extended."""
    out, week4 = staged["out"], staged["week4"]
    due = RELEASE.glob("10.[1-4]*/*.ipynb")
    assert shipped(out) == sorted(p.relative_to(RELEASE).as_posix() for p in due)
    for path, content in staged["snapshot"].items():
        if path.startswith("notebooks/"):
            assert (out / path).read_bytes() == content, f"{path} was rewritten"
    assert sorted(p.split("/")[1] for p in week4.added if p.startswith("notebooks/")) == [
        "10.3-multi-head-attention", "10.4-positional-encoding"]
    assert "course/figures_block.py" in week4.added and "README.md" in week4.updated
    assert week4.kept == [] and (out / ".git" / "HEAD").is_file()
    assert (out / "README.md").read_text().count("colab-badge.svg") == 4
    assert leak_check.find_leaks(out, SOLUTIONS) == []


def test_earlier_solutions_are_given_code_once_due(staged):
    """10.3 carries 10.2's solutions as given code: allowed once 10.2 is due (the leak check
    would otherwise have nothing to tell apart)."""
    notebook = next((staged["out"] / "notebooks").glob("10.3*/*.ipynb"))
    text = code_text(notebook)
    answers = leak_check.solution_lines(next(SOLUTIONS.glob("10.2*/*.ipynb")))
    given = [line for line in answers if line in text]
    assert given, "10.3 no longer carries 10.2's solutions: this test proves nothing"
    assert leak_check.find_leaks(staged["out"], SOLUTIONS) == []


def test_solutions_of_a_section_not_yet_due_are_caught(staged, tmp_path):
    """A line of 10.5's solution in the 10.3 notebook, or the 10.5 notebook itself, in a
    release through 10.4: both caught."""
    copy = tmp_path / "release"
    shutil.copytree(staged["out"], copy, ignore=shutil.ignore_patterns(".git"))
    future = sorted(leak_check.solution_lines(next(SOLUTIONS.glob("10.5*/*.ipynb"))))[0]
    notebook = next((copy / "notebooks").glob("10.3*/*.ipynb"))
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(future))
    nbformat.write(nb, notebook)
    shutil.copytree(RELEASE / "10.5-transformer-block", copy / "notebooks" / "10.5-transformer-block")
    leaks = leak_check.find_leaks(copy, SOLUTIONS)
    assert any("10.3" in leak and "section not yet due" in leak and future in leak for leak in leaks), leaks
    assert "notebooks/10.5-transformer-block: section not yet due" in leaks


def test_a_release_cannot_withdraw_sections_or_change_name(staged):
    """Publishing an earlier --through, or as another repository or branch, is refused."""
    with pytest.raises(PublishError, match="would withdraw 10.3-multi-head-attention"):
        bundle.publish(staged["out"], through="10.2")
    with pytest.raises(PublishError, match="was published as transformer-course/transformer-course"):
        bundle.publish(staged["out"], repository=OTHER, through="10.5")
    with pytest.raises(UsageError, match="no such section; choose one of 10.1, 10.2"):
        bundle.publish(staged["out"], through="10.10")


def test_a_changed_course_notebook_does_not_overwrite_the_published_one(tmp_path):
    """When the course's 10.1 changes after 10.1 was published, the next release keeps the
    published copy and says so."""
    root = tmp_path / "course-copy"
    copy_course(root)
    out = tmp_path / "student-repo"
    bundle.publish(out, through="10.1", root=root)
    published = next((out / "notebooks").glob("10.1*/*.ipynb"))
    before = published.read_bytes()
    source = next((root / "notebooks").glob("10.1*/*.ipynb"))
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("An erratum."))
    nbformat.write(nb, source)
    release = bundle.publish(out, through="10.2", root=root)
    assert published.read_bytes() == before
    assert release.kept == [published.relative_to(out).as_posix()]
    assert "kept notebooks/10.1" in release.text()


def test_published_notebooks_must_keep_finding_their_helpers(tmp_path):
    """A helper the published 10.1 imports, gone from course/: the next release is refused
    and nothing is written."""
    root = tmp_path / "course-copy"
    copy_course(root)
    out = tmp_path / "student-repo"
    bundle.publish(out, through="10.1", root=root)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    plotting = root / "course" / "plotting.py"  # 10.1 imports heatmap from it
    assert "from course.plotting import heatmap" in (out / "notebooks").joinpath(
        "10.1-self-attention", "self_attention.ipynb").read_text()
    plotting.write_text(plotting.read_text().replace("def heatmap(", "def heatmap_renamed("))
    with pytest.raises(PublishError, match="imports course.plotting.heatmap"):
        bundle.publish(out, through="10.2", root=root)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_command_line_publishes_week_by_week(tmp_path, capsys):
    """``student-bundle OUT --through 10.2 --repository R`` then ``--through 10.3`` (the
    repository taken from the first release): what each run says."""
    out = tmp_path / "student-repo"
    assert main(["student-bundle", str(out), "--through", "10.2", "--repository", OTHER]) == 0
    first = capsys.readouterr().out
    assert "sections 10.1, 10.2 " in first and "self_attention.ipynb" in first
    assert main(["student-bundle", str(out), "--through", "10.3"]) == 0
    second = capsys.readouterr().out
    assert "sections 10.1, 10.2, 10.3 " in second and "self_attention.ipynb" not in second
    assert main(["student-bundle", str(out), "--through", "10.1"]) == 1
    assert "would withdraw" in capsys.readouterr().err


HIDE_CHECKOUT = ("sys.meta_path[:] = [f for f in sys.meta_path "
                 "if '__editable__' not in getattr(f, '__module__', '')]\n")


@pytest.mark.slow  # fresh Python processes that import torch
@pytest.mark.parametrize("through", ["10.1", "10.4"])  # where the helpers shipped grow
def test_a_staged_release_imports_from_its_own_helpers(through, tmp_path):
    """In a Python that cannot see this checkout, do every shipped helper module and every
    course import of the published notebooks load from the release's own course/?"""
    out = bundle.build_student_bundle(tmp_path / "release", through=through)
    statements = [ast_line for nb in (out / "notebooks").glob("*/*.ipynb")
                  for ast_line in course_import_lines(nb)]
    modules = sorted(".".join(p.relative_to(out).with_suffix("").parts).removesuffix(".__init__")
                     for p in (out / "course").rglob("*.py"))
    code = ("import importlib, sys\n"
            + HIDE_CHECKOUT +
            f"sys.path[:] = [{str(out)!r}] + [p for p in sys.path if p not in ('', {str(ROOT)!r})]\n"
            "import matplotlib; matplotlib.use('Agg')\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            + "\n".join(statements) + "\n"
            "import course; print(course.__file__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(out / "course" / "__init__.py")


def course_import_lines(notebook):
    """The ``import course...`` / ``from course... import`` statements of a notebook's code."""
    import ast

    lines = []
    for source in bundle.code_cells(notebook):
        for node in ast.walk(bundle.parse_code(source)):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and bundle.course_imports(
                    ast.Module(body=[node], type_ignores=[])):
                lines.append(ast.unparse(node))
    return lines


# ---------------------------------------------------------------- under another name


def test_renamed_release_fetches_from_its_own_repository(renamed):
    """Published as example-org/transformer-course on term-2027: does every set-up cell install
    the helpers from that repository at that branch (nbgrader's checksum kept right), and
    every badge point there?"""
    notebooks = sorted((renamed / "notebooks").glob("*/*.ipynb"))
    assert len(notebooks) == len(list(RELEASE.glob("*/*.ipynb")))
    for path in notebooks:
        cell = cell_with_source_line(path)
        assert cell.metadata["nbgrader"]["grade_id"] == "setup"
        assert setup_cell.course_source(cell.source) == (OTHER, TERM), path
        assert f"%pip install -q git+https://github.com/{OTHER}@{TERM}\n" in cell.source
        assert cell.metadata["nbgrader"]["checksum"] == compute_checksum(cell)
        assert "transformer-course/transformer-course" not in path.read_text()
    readme = (renamed / "README.md").read_text()
    assert f"mybinder.org/v2/gh/{OTHER}/{TERM}?urlpath" in readme
    for path in notebooks:
        rel = path.relative_to(renamed).as_posix()
        assert f"https://colab.research.google.com/github/{OTHER}/blob/{TERM}/{rel}" in readme
    assert "transformer-course/transformer-course" not in readme
    assert leak_check.find_leaks(renamed, SOLUTIONS) == []


def test_the_grader_does_not_take_a_published_set_up_cell_for_an_edit(renamed):
    """Graded against the instructor's set-up cell, a published one counts as unedited; a
    learner's real edit still counts."""
    for path in sorted((renamed / "notebooks").glob("*/*.ipynb")):
        published = cell_with_source_line(path).source
        original = cell_with_source_line(SOLUTIONS / path.relative_to(renamed / "notebooks")).source
        assert published != original
        assert as_released(published) == as_released(original)
        assert as_released(published + "\nimport os") != as_released(original)
        assert as_released(published.replace("import sys", "import sys, grader")) != as_released(original)
        extra = published.replace("%pip install -q", "%pip install -q grader")
        assert as_released(extra) != as_released(original)


def test_set_up_rewrite_needs_its_pip_line():
    """Without the pip line's address, or with two, a notebook could not install its helpers
    on Colab: the release stops with what to do. Names that could run as shell are refused."""
    with pytest.raises(PublishError, match="names 0 addresses"):
        setup_cell.point_at("import sys\n", OTHER, TERM)
    line = "    %pip install -q git+https://github.com/a/b@main\n"
    with pytest.raises(PublishError, match="names 2 addresses"):
        setup_cell.point_at(line + line, OTHER, TERM)
    pointed = setup_cell.point_at(line, OTHER, TERM)
    assert pointed == f"    %pip install -q git+https://github.com/{OTHER}@{TERM}\n"
    assert setup_cell.point_at(pointed, OTHER, TERM) == pointed  # idempotent
    assert setup_cell.neutral(pointed) == setup_cell.neutral(line)
    with pytest.raises(PublishError, match="--branch"):
        setup_cell.point_at(line, OTHER, "x; rm -rf ~")
    with pytest.raises(PublishError, match="--repository"):
        setup_cell.point_at(line, "not a repository", TERM)


GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", "-c", "init.defaultBranch=main"]
#: Colab as far as the set-up cell can tell: google.colab imported, IPython running the cell
#: (its %pip installs into this very Python), the course already there only via pip.
SIMULATED_COLAB = textwrap.dedent("""
    import json, sys, types
    sys.modules['google'] = types.ModuleType('google')
    sys.modules['google.colab'] = types.ModuleType('google.colab')
    import matplotlib; matplotlib.use('Agg')
    from IPython.core.interactiveshell import InteractiveShell
    result = InteractiveShell.instance().run_cell(open(sys.argv[1]).read())
    result.raise_error()
    import course
    from course.translation import load_pairs
    print(json.dumps({'course': course.__file__, 'pairs': len(load_pairs())}))
""")


@pytest.mark.slow
def test_set_up_cell_installs_the_published_branch_on_colab(renamed, tmp_path):
    """On (simulated) Colab, with the published repository served from a local git repository
    whose main branch holds something else: does the set-up cell's pip line install the
    helpers (and the corpus of 10.6) from term-2027, importable at once?

    Colab's Python stands here as a fresh virtual environment that sees this checkout's
    packages (torch, IPython) but not its course helpers."""
    remote = tmp_path / "remote"
    shutil.copytree(renamed, remote)
    subprocess.run([*GIT, "init", "-q", str(remote)], check=True)
    subprocess.run([*GIT, "-C", str(remote), "commit", "-q", "--allow-empty", "-m", "main"], check=True)
    subprocess.run([*GIT, "-C", str(remote), "checkout", "-q", "-b", TERM], check=True)
    subprocess.run([*GIT, "-C", str(remote), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(remote), "commit", "-q", "-m", "release"], check=True)
    subprocess.run([*GIT, "-C", str(remote), "checkout", "-q", "main"], check=True)  # HEAD: no course
    colab = tmp_path / "colab"
    subprocess.run([sys.executable, "-m", "venv", str(colab)], check=True)
    python = colab / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "colab_packages.pth").write_text(ours + "\n")  # torch and friends, not course
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0=f"url.file://{remote}.insteadOf",
               GIT_CONFIG_VALUE_0=setup_cell.clone_url(OTHER))
    harness = tmp_path / "colab.py"
    harness.write_text(SIMULATED_COLAB)
    path = next((renamed / "notebooks").glob("10.6*/*.ipynb"))
    (tmp_path / "setup.py").write_text(cell_with_source_line(path).source)
    done = subprocess.run([str(python), str(harness), "setup.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown["course"].startswith(site), shown  # pip's copy, not this checkout
    assert shown["pairs"] > 1000, shown
