"""The hidden checks of 10.6 beyond "this answer passes, that bug fails" (those are declared in
tests/answers/s10_6/): registration, records, the mistakes and properties the diagnoses come from,
and the visible tests' wording of what grading says."""

from __future__ import annotations

import re

import pytest
import torch

from course import checking
from course.visible.s10_6.transformer import inputs
from grader.checks import s10_6
from grader.checks.guarded_calls import close, grading_device
from grader.checks.s10_6 import transformer
from samples import load_solution_namespace
from tests import catalogue
from tests.answers.s10_6 import transformer as transformer_answers
from tests.check_helpers import assert_records_verify, assert_registered

ASSIGNMENT = "10.6-encoder-decoder"
NAMES = ("causal_mask", "padding_mask", "DecoderBlock", "Transformer", "greedy_decode", "train_step")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.6 exercise by name?"""
    assert_registered("10.6", s10_6, NAMES)


@pytest.mark.slow  # a fresh Python importing torch
def test_records_verify_in_a_clean_process(tmp_path, monkeypatch, solution):
    """Do the solution's saved records pass the clean-process verification?"""
    assert_records_verify(s10_6, NAMES, solution, tmp_path, monkeypatch)


# ---------------------------------------------------------------- the checks' own machinery


@pytest.mark.parametrize("exercise", [e for e in s10_6.EXERCISES.values()
                                      if not isinstance(e, checking.Prediction)], ids=lambda e: e.name)
def test_every_mistake_shows_in_some_case(exercise):
    """Is every named mistake different from the right answer in at least one case (else it
    could never be diagnosed)?"""
    device = grading_device()
    for mistake, run in exercise.mistakes.items():
        differs = False
        for case in exercise.cases():
            want = exercise.reference(case, device)
            got = run(case, device)
            differs |= any(not close(got[key], want[key], 1e-6, 1e-7) for key in want if key in got)
        assert differs, f"{exercise.name}: mistake {mistake.name} never differs from the reference"


def test_property_checks_catch_what_they_claim(solution):
    """Do the causality and padding properties themselves reject a leaking model?"""
    transformer_answers.answers(solution)  # the bugs' given code
    exercise, case = s10_6.EXERCISES["Transformer"], transformer.CASES[1]
    device = grading_device()
    src, tgt, _, _ = inputs(case, device)
    bugs = ((transformer_answers.TransformerNoCausal, exercise.check_causal, r"sees the future"),
            (transformer_answers.TransformerNoPadding, exercise.check_padding, r"padding leaks"))
    for impl, check, match in bugs:
        torch.manual_seed(0)
        model = exercise.build_model(impl, case, device)
        with pytest.raises(AssertionError, match=match):
            check(model, src, tgt, case)


# ---------------------------------------------------------------- one wording on both sides

DECODING = [e for e in catalogue.build() if e.section == "10.6"
            and e.exercise == "greedy_decode" and not e.correct and e.hidden and not e.grading_only]


@pytest.mark.parametrize("entry", catalogue.params(DECODING))
def test_visible_test_says_what_grading_says(entry):
    """Does the visible test reject each decoding bug with the hidden check's words (the one wording
    of each message), so that a learner reads before grading what grading will say?"""
    failure = catalogue.run_visible(entry)
    assert re.search(entry.hidden, str(failure), flags=re.IGNORECASE), catalogue.message(failure)


# ---------------------------------------------------------------- the toolkit's stand-ins


@pytest.mark.parametrize("norm_first", [False, True])
def test_stand_in_translator_teacher_forced_is_its_decoder(norm_first):
    """Does the visible check's one teacher-forced pass give the stand-in's own decode logits (so a
    right cached decoder is judged by what greedy_decode would do), and does each switch change them?"""
    from course.checking.standins import StandInTranslator, teacher_forced

    model = StandInTranslator((1, 2), norm_first, "relu", 0, seed=3)
    src, tgt = torch.tensor([[4, 5, 6, 0]]), torch.tensor([[1, 7, 3, 9]])
    src_mask = (src != 0)[:, None, None, :]
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        logits = model.decode(tgt, memory, src_mask)
        assert close(teacher_forced(model, tgt, memory, src_mask), logits, 1e-7, 1e-9)
        for switch in ({"position": "zero"}, {"self_mask": "own"}, {"memory_mask": False},
                       {"norm_first": not norm_first}):
            changed = teacher_forced(model, tgt, memory, src_mask, **switch)
            assert not close(changed, logits, 1e-4, 1e-5), switch


def test_scripted_model_follows_each_sentence_by_its_key():
    """Does the scripted stand-in predict each sentence's script whatever the order of the rows?"""
    from course.checking.standins import OFF_SCRIPT, scripted_batch

    model, src = scripted_batch([[1, 5, 2], [1, 7, 8, 2]])
    flipped = src.flip(0)
    logits = model.decode(torch.tensor([[1, 7], [1, 5]]), model.encode(flipped))  # rows swapped
    assert logits.argmax(-1).tolist() == [[7, 8], [5, 2]]
    off = model.decode(torch.tensor([[1, 9]]), model.encode(src[:1]))  # 9 is not the script's
    assert off.argmax(-1).tolist() == [[5, OFF_SCRIPT]]


# ---------------------------------------------------------------- train_step


def test_every_train_step_mistake_shows_in_a_visible_case():
    """Does each known train_step mistake change what some visible setting leaves behind (else the
    visible check could never name it)?"""
    from course.visible.s10_6 import train_step

    for mistake, change in train_step.VARIANTS.items():
        differs = []
        for setting, dtype in zip(train_step.SETTINGS, train_step.DTYPES):
            want = train_step.expected(setting, dtype, "cpu")
            got = train_step.expected(setting, dtype, "cpu", change)
            differs.append(any(not close(got[key], want[key], 1e-6, 1e-7) for key in want))
        assert any(differs), mistake.name


def test_train_step_settings_clip_and_pad():
    """Do the gradients of every clipped setting exceed max_grad_norm (else clipping does nothing),
    and do the targets hold padding and no pad_id among their words?"""
    from course.visible.s10_6 import train_step
    from grader.checks.s10_6.train_step import MORE

    for setting in [*train_step.SETTINGS, *MORE]:
        trial = train_step.build(setting, torch.float64, "cpu")
        src, tgt = trial.batches[0]
        trial.model.train()
        logits = trial.model(src, tgt[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(),
                                          ignore_index=setting.pad_id).backward()
        norm = torch.nn.utils.get_total_norm([p.grad for p in trial.model.parameters()])
        assert setting.max_grad_norm is None or norm > 1.5 * setting.max_grad_norm, setting.name
        assert (tgt == setting.pad_id).any(), setting.name
        words = [row[1:row.index(train_step.EOS)] for row in tgt.tolist()]
        assert all(setting.pad_id not in w for w in words), setting.name


def shipped_callables() -> dict:
    """Every function and class the course package (what learners get) defines, and the functions of
    its classes, by dotted name."""
    import importlib
    import inspect
    import pkgutil

    import course

    found = {}
    for info in pkgutil.walk_packages(course.__path__, "course."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if not callable(value) or not str(getattr(value, "__module__", "")).startswith("course"):
                continue
            found[f"{value.__module__}.{value.__qualname__}"] = value
            if inspect.isclass(value):
                for name, member in vars(value).items():
                    if inspect.isfunction(member):
                        found[f"{value.__module__}.{value.__qualname__}.{name}"] = member
    return found


def given_callables() -> dict:
    """The functions and classes of the 10.6 notebook's set-up and given cells (what learners get)."""
    import inspect

    import nbformat

    from samples import notebook_path

    ns = load_solution_namespace(ASSIGNMENT)
    solved = {c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(notebook_path(ASSIGNMENT), 4).cells
              if c.metadata.get("nbgrader", {}).get("solution")}
    return {f"notebook's {name}": value for name, value in ns.items() if name not in solved
            and (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == ns["__name__"]}


def test_no_shipped_function_is_a_train_step():
    """Handed in as train_step, does every function and class the course package ships (the visible
    check's reference among them) and every one the notebook gives fail both the visible test and
    grading?"""
    import matplotlib.pyplot as plt

    from course.visible import s10_6 as visible

    exercise, device = s10_6.EXERCISES["train_step"], grading_device()

    def graded(candidate):  # the hidden check's cases and extra checks, without its per-call tamper scan
        for case in exercise.cases():
            exercise.evaluate(case, exercise.run(candidate, case, device), device)
        exercise.extra_checks(candidate, device)

    shipped, given = shipped_callables(), given_callables()
    assert "course.visible.s10_6.train_step.expected" in shipped and len(shipped) > 100
    assert "notebook's train_translator" in given and "notebook's train_step" not in given
    shipped.update(given)
    passing = []
    for name, candidate in shipped.items():
        for side, check in (("visible", visible.check_train_step), ("hidden", graded)):
            try:
                check(candidate)
            except AssertionError:
                continue
            finally:
                plt.close("all")
            passing.append(f"{name} ({side})")
    assert not passing, passing
    with pytest.raises(AssertionError, match="train_step raised"):  # the hidden check itself, once
        s10_6.check_train_step(shipped["course.visible.s10_6.train_step.expected"])


# ---------------------------------------------------------------- issue 33: named on both sides

ISSUE_33 = {"DecoderBlock": ("no sublayer dropout", "dropout after the residual sum",
                             "dropout on the sublayer's input", "FeedForward without dropout",
                             "norms created first", "cross_attn created before self_attn"),
            "Transformer": ("out created before the blocks", "decoder blocks created before the encoder's"),
            "greedy_decode": ("the notebook's PAD instead of model.pad_id",),
            "train_step": ("scored on tgt[:, :-1]", "zero_grad between backward() and step()",
                           "clip_grad_value_", "reduction='sum'", "model.eval()")}
NAMED = [e for e in catalogue.build() if e.section == "10.6"
         and e.label in ISSUE_33.get(e.exercise, ())]


def test_issue_33_bugs_are_planted():
    """Is every mistake issue 33 lists for 10.6 planted, with the Mistake it must be named by?"""
    assert {(e.exercise, e.label) for e in NAMED if e.mistake} == \
        {(exercise, label) for exercise, labels in ISSUE_33.items() for label in labels}


@pytest.mark.parametrize("entry", catalogue.params(NAMED))
def test_issue_33_bug_named_on_both_sides(entry):
    """Do the visible test and grading both reject it naming its Mistake (those outside an exercise's
    table of variants too: the creation order, the global PAD), with the mistake's sentence?"""
    for failure in (catalogue.run_visible(entry), catalogue.run_hidden(entry)):
        assert getattr(failure, "mistake", None) == entry.mistake, catalogue.message(failure)
        assert entry.mistake.sentence() in str(failure)
