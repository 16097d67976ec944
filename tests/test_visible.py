"""Do the visible tests predict the grade: never stricter than the hidden checks, catching what
they catch, naming the mistake, instantly, and recording what they said for "where you stand"?

The visible test of an exercise is its test cell's code before the hidden block, run in the
instructor notebook's namespace with the exercise swapped (samples.run_visible_test).
The right answers and planted bugs are those declared in tests/answers/ (and, for sections not
moved there yet, listed in tests/catalogue.py; ``python -m tests.catalogue`` prints the table).
"""

from __future__ import annotations

import re

import nbformat
import pytest

from course import checking, progress
from course.checking.forbidden import ForbiddenCall
from grader.checks import EXERCISES, SECTIONS, guarded_calls
from grader.results import exercise_name
from samples import graded_cells, notebook_path, visible_test
from tests import catalogue, dictation
from tests.answers import assignment_of

ENTRIES = catalogue.build()
RIGHT = [e for e in ENTRIES if e.correct]
PLANTED = [e for e in ENTRIES if not e.correct and not e.grading_only]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with checking.single_thread():
        yield


def test_one_checking_toolkit():
    """Do the hidden checks fail, compare and call learner code with the very toolkit the visible
    tests use (one failure type, the same tolerances and notion of "close")?"""
    for name in ("CheckFailure", "close", "tolerance", "describe_difference", "Outputs", "generator",
                 "randn"):
        assert getattr(guarded_calls, name) is getattr(checking, name), name


@pytest.mark.parametrize("entry", catalogue.params(RIGHT))
def test_visible_never_stricter_than_hidden(entry):
    """Does every right answer the suite knows, which the hidden check accepts
    (tests/test_answers.py::test_right_answer_passes), pass the visible test too (e.g. a softmax
    written as exp(x - logsumexp(x)), in float32, with logits of 1e4)?"""
    visible = catalogue.run_visible(entry)
    assert visible is None, \
        f"the visible test rejects what the hidden check accepts: {catalogue.message(visible)}"


@pytest.mark.parametrize("entry", catalogue.params(PLANTED))
def test_visible_test_catches_planted_bug(entry):
    """Does the visible test reject every planted bug that is not for grading alone to see, and
    name the mistake the bug is declared with, in grading's words where both sides fail in the same
    case (the case and the numbers aside), so the learner reads at grading what the notebook said?"""
    failure = catalogue.run_visible(entry)
    assert failure is not None
    if entry.mistake is not None:
        assert getattr(failure, "mistake", None) == entry.mistake, catalogue.message(failure)
        assert entry.mistake.sentence() in str(failure)
        visible, hidden = one_wording(failure, catalogue.run_hidden(entry))
        assert visible == hidden, f"\n  visible: {visible}\n  hidden:  {hidden}"
    printed = dictation.answer_line_in(str(failure), entry.section, entry.exercise)
    assert printed is None, f"the message prints a line of the answer ({printed}): {failure}"


def _worded(failure: BaseException) -> tuple[str | None, str]:
    """A failure's case and its first line with the case and the numbers left out."""
    line = str(failure).strip().splitlines()[0]
    case = re.search(r"in case '([^']*)'", line)
    line = re.sub(r"in case '[^']*'", "in case …", line)
    return (case.group(1) if case else None), re.sub(r"[-+]?\d[\d.e+-]*", "N", line)


def one_wording(visible: BaseException, hidden: BaseException | None) -> tuple[str | None, str | None]:
    """The two sides' first lines, numbers and case left out, where both failed in the same case;
    (None, None) where they failed in different cases (their sentences name different things)."""
    if hidden is None:
        return None, None
    (v_case, v_line), (h_case, h_line) = _worded(visible), _worded(hidden)
    return (v_line, h_line) if v_case is not None and v_case == h_case else (None, None)


FORBIDDEN_CALLS = [e for e in PLANTED if e.hidden and e.hidden.startswith("No credit")]


@pytest.mark.parametrize("entry", catalogue.params(FORBIDDEN_CALLS))
def test_a_forbidden_call_fails_both_sides_in_the_same_words(entry):
    """Does an answer that calls the reference (or the shipped checking code) fail the visible
    check with grading's own message, not pass it to lose the marks at grading?"""
    visible, hidden = catalogue.run_visible(entry), catalogue.run_hidden(entry)
    assert isinstance(visible, ForbiddenCall), catalogue.message(visible)
    assert str(visible) == str(hidden)


FIXED_DEVICE_BUGS = [e for e in PLANTED if e.hidden and "device" in e.hidden]


@pytest.mark.parametrize("entry", catalogue.params(FIXED_DEVICE_BUGS))
def test_a_fixed_device_fails_both_sides_in_the_same_words(entry):
    """Does code that makes a tensor on a fixed device fail the visible check, on a machine without
    a GPU, in grading's words (the engine's one probe, course.checking.devices, or the exercise's own
    check of a device argument)?"""
    visible, hidden = catalogue.run_visible(entry), catalogue.run_hidden(entry)
    assert visible is not None and str(visible) == str(hidden)


def test_every_exercise_that_forbids_calls_plants_one():
    """Is every exercise with calls it may not make planted with an answer that makes one?"""
    planted = {e.exercise for e in FORBIDDEN_CALLS}
    assert {name for name, exercise in EXERCISES.items() if exercise.forbidden} <= planted


def test_catalogue_has_the_bugs_the_issue_asks_for():
    """Aliased submodules, other ranks, options, the 10.6 model's sentences: are they planted?"""
    labels = {e.label for e in PLANTED}
    for label in ("QKVAliased", "w_k is w_q (aliased)", "cross_attn is self_attn (aliased)",
                  "one encoder block repeated (aliased)", "qkv_mm", "qkv_einsum_3d",
                  "K.transpose(1, 2): 3-D only", "K.T: 2-D only", "BlockNormFirstIgnored", "always pre-norm",
                  "bias ignored (never a bias)", "no source positions", "max_len ignored",
                  "norm_first not passed to the blocks"):
        assert label in labels, label


@pytest.mark.slow
def test_visible_tests_catch_what_hidden_checks_catch(capsys):
    """Over every planted bug, do the visible tests catch at least 95% of what the hidden checks
    catch (leaving aside calls to the reference and fixed devices), naming most mistakes?"""
    text, totals = catalogue.table(ENTRIES)
    with capsys.disabled():
        print("\n" + text)
    assert totals["hidden"] >= 150
    assert totals["visible of hidden"] >= 0.95 * totals["hidden"], totals["missed"]
    assert totals["named"] >= 0.85 * totals["visible"]
    named = [e for e in PLANTED if e.mistake is not None]  # each compared by the test above
    compared = sum(one_wording(catalogue.run_visible(e), catalogue.run_hidden(e))[0] is not None
                   for e in named)
    assert compared >= 20, f"only {compared} failures compared in the same words: the test proves little"


# ---------------------------------------------------------------- the test cells


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_test_cell_runs_its_visible_check(section):
    """Does every test cell call visible.check_<name>(<name>), and does course.visible have it?"""
    import importlib

    module = importlib.import_module(f"course.visible.s{section.replace('.', '_')}")
    assignment = assignment_of(section)
    for name in graded_cells(assignment):
        assert f"visible.check_{name}({name})" in visible_test(assignment, name), name
        assert callable(getattr(module, f"check_{name}")), name


# ---------------------------------------------------------------- where you stand


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_points_come_from_the_notebook(section):
    """Does "where you stand" list every graded exercise of the notebook, in order, with the points
    of its nbgrader metadata, and is every one of them a hidden check?"""
    nb = nbformat.read(notebook_path(assignment_of(section)), as_version=4)
    graded = {exercise_name(c.metadata["nbgrader"]["grade_id"]): c.metadata["nbgrader"]["points"]
              for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    assert list(progress.exercises(section).items()) == list(graded.items())
    assert set(graded) <= set(EXERCISES)
    last = nb.cells[-1]
    assert last.cell_type == "code" and last.source == f'course.progress.where_you_stand("{section}")'


def test_points_are_read_from_the_learners_notebook(tmp_path, monkeypatch):
    """Does the table follow the points of the notebook in the working folder (the learner's own),
    so that points live in the notebook's metadata and nowhere else?"""
    nb = nbformat.read(notebook_path(assignment_of("10.1")), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "check_qkv_projections":
            cell.metadata["nbgrader"]["points"] = 7
    nbformat.write(nb, tmp_path / "self_attention.ipynb")
    monkeypatch.chdir(tmp_path)
    progress.exercises.cache_clear()
    try:
        assert progress.exercises("10.1")["qkv_projections"] == 7
        assert f"0 / {sum(progress.exercises('10.1').values())}" in progress.report("10.1")  # 7 counted
    finally:
        progress.exercises.cache_clear()


def test_test_cells_are_recognised():
    """Is a test cell known by its opening docstring, and nothing else?"""
    cell = '"""Check softmax: against torch.softmax."""\nvisible.check_softmax(softmax)'
    assert progress.exercise_of(cell) == "softmax"
    assert progress.exercise_of('  """Check DecoderBlock against ..."""') == "DecoderBlock"
    assert progress.exercise_of('x = 1\n"""Check softmax"""') is None
    assert progress.exercise_of("softmax(x)") is None


@pytest.fixture()
def fresh_progress():
    progress.forget()
    yield
    progress.forget()


def test_where_you_stand_blank_half_done_finished(fresh_progress):
    """Does the table show points, passed / failed with the diagnosis / not attempted, and the total?"""
    points = progress.exercises("10.2")
    total = sum(points.values())
    blank = progress.report("10.2")
    assert blank.count("not attempted") == len(points) and f"0 / {total}" in blank and "gradients" in blank
    progress.observe('"""Check softmax ..."""', None)
    failure = AssertionError("scaled_dot_product_attention differs ...\nThis looks like attention without "
                             "the 1/sqrt(d_k) scaling. Divide the scores by sqrt(d_k).")
    progress.observe('"""Check scaled_dot_product_attention ..."""', failure)
    progress.observe('"""Check dot_product_variance ..."""', NotImplementedError())
    half = progress.report("10.2")
    assert f"{points['softmax']} / {points['softmax']}  passed" in half \
        and f"0 / {points['scaled_dot_product_attention']}  failed" in half \
        and "This looks like attention without" in half
    assert f"{points['softmax']} / {total}" in half and "not attempted" in half
    for name in points:
        progress.observe(f'"""Check {name}"""', None)
    assert f"{total} / {total}" in progress.report("10.2") and "failed" not in progress.report("10.2")


def test_other_errors_are_named(fresh_progress):
    """Is an error that is not a check's failure (a NameError of another name, say) shown with its type?"""
    progress.observe('"""Check softmax"""', NameError("name 'np' is not defined"))
    assert "NameError: name 'np' is not defined" in progress.report("10.2")


def test_a_test_cell_run_before_its_answer_cell_is_not_attempted(fresh_progress):
    """Does a test cell that meets its exercise's own name undefined (the answer cell has not run:
    a prediction's, say) read "not attempted", with what to run, rather than "failed"?"""
    progress.observe('"""Check qk_variance: ..."""', NameError("name 'qk_variance' is not defined"))
    line = next(line for line in progress.report("10.2").splitlines() if line.startswith("qk_variance"))
    assert "not attempted" in line and "failed" not in line
    assert "the cell that defines qk_variance has not run yet" in " ".join(progress.report("10.2").split())


@pytest.mark.slow
def test_where_you_stand_in_a_notebook(tmp_path, monkeypatch):
    """In a real kernel, does the last cell of a half-done notebook show what its test cells said?"""
    from nbclient import NotebookClient

    import samples

    monkeypatch.setenv("COURSE_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    assignment = assignment_of("10.1")
    nb = samples.solved(assignment)
    unfinished = ("class QKVProjection(nn.Module):\n    def __init__(self, d, k, v):\n"
                  "        raise NotImplementedError()")
    nb = samples.plant(nb, "QKVProjection", unfinished, append=False)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(out.get("text", "") for out in nb.cells[-1].outputs)
    assert "qkv_projections" in text and "2 / 2  passed" in text
    points = progress.exercises("10.1")
    total = sum(points.values())
    assert "0 / 2  not attempted" in text and f"{total - points['QKVProjection']} / {total}" in text


def test_where_you_stand_without_its_notebook(tmp_path, monkeypatch):
    """When the notebook cannot be found (a copy graded far from the course), does the table
    say so in a line instead of raising?"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress, "COURSE_DIR", tmp_path)
    progress.exercises.cache_clear()
    try:
        assert "no notebook of 10.1 was found" in progress.report("10.1")
    finally:
        progress.exercises.cache_clear()


def test_a_prediction_is_graded_by_a_predict_cell():
    """Is every prediction's test cell a ``predict_<name>`` cell, every ``predict_`` cell a
    prediction's, and do the learner's side and grading's read grade ids alike?"""
    from grader import results

    assert progress.GRADE_ID_PREFIXES == results.GRADE_ID_PREFIXES
    for section in sorted(SECTIONS):
        nb = nbformat.read(notebook_path(assignment_of(section)), as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.metadata.get("nbgrader", {}).get("grade"):
                exercise = EXERCISES[exercise_name(grade_id)]
                assert isinstance(exercise, checking.Prediction) == grade_id.startswith("predict_"), grade_id
