"""The hidden checks of 10.6 beyond "this answer passes, that bug fails" (those are declared in
tests/answers/s10_6/): registration, records, the functional models the diagnoses come from,
and the visible tests' wording of what grading says."""

from __future__ import annotations

import re

import pytest
import torch

from grader.checks import s10_6
from grader.checks.core import close, grading_device, tolerance
from grader.checks.s10_6 import decoder_block, transformer
from samples import load_solution_namespace
from tests import catalogue
from tests.answers import declared
from tests.answers.s10_6 import transformer as transformer_answers

ASSIGNMENT = "10.6-encoder-decoder"
NAMES = ("causal_mask", "padding_mask", "DecoderBlock", "Transformer", "greedy_decode")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.6 exercise by name?"""
    from grader.checks import EXERCISES, SECTIONS

    assert SECTIONS["10.6"] is s10_6
    for name in NAMES:
        assert EXERCISES[name].name == name
        assert getattr(s10_6, f"check_{name}") == EXERCISES[name].check


def test_records_verify_in_a_clean_process(tmp_path, monkeypatch, solution):
    """Do the solution's saved records pass the clean-process verification?"""
    from grader.autograde.worker.verify import verify_records

    monkeypatch.setenv("COURSE_GRADING_DIR", str(tmp_path))
    for name in NAMES:
        getattr(s10_6, f"check_{name}")(solution[name])
    verdicts = verify_records(tmp_path)
    assert set(verdicts) == set(NAMES)
    assert all(v.passed for v in verdicts.values()), {k: v.reason for k, v in verdicts.items()}


# ---------------------------------------------------------------- the checks' own machinery


@pytest.mark.parametrize("case", decoder_block.DECODER_CASES, ids=str)
def test_functional_decoder_block_matches_torch(case):
    """Does the functional block the diagnoses come from agree with nn.TransformerDecoderLayer?"""
    device = grading_device()
    got = decoder_block._functional_decoder_outputs(case, device)
    want = decoder_block.DecoderBlockModule().reference(case, device)
    assert set(got) == set(want)
    for key in want:
        assert close(got[key], want[key], *tolerance(case.dtype, device)), key


@pytest.mark.parametrize("case", transformer.TRANSFORMER_CASES, ids=str)
def test_functional_transformer_matches_torch(case):
    """Does the functional model the diagnoses come from agree with nn.TransformerEncoder/Decoder?"""
    device = grading_device()
    got = transformer._functional_transformer_outputs(case, device)
    want = transformer.TransformerModel().reference(case, device)
    assert list(got)[:2] == ["memory", "logits"]
    for key in want:
        assert close(got[key], want[key], *tolerance(case.dtype, device)), key


@pytest.mark.parametrize("exercise", s10_6.EXERCISES.values(), ids=lambda e: e.name)
def test_every_mistake_shows_in_some_case(exercise):
    """Is every named mistake different from the right answer in at least one case (else it
    could never be diagnosed)?"""
    device = grading_device()
    for mistake, run in exercise.mistakes.items():
        differs = False
        for case in exercise.cases():
            want = exercise.reference(case, device)
            got = run(case, device)
            key = next(iter(want))
            differs |= not close(got[key], want[key], 1e-6, 1e-7)
        assert differs, f"{exercise.name}: mistake {mistake.name} never differs from the reference"


def test_property_checks_catch_what_they_claim(solution):
    """Do the causality and padding properties themselves reject a leaking model?"""
    transformer_answers.answers(solution)  # the bugs' given code
    exercise, case = transformer.TransformerModel(), transformer.TRANSFORMER_CASES[1]
    device = grading_device()
    src, tgt, _ = transformer.transformer_inputs(case, device)
    bugs = ((transformer_answers.TransformerNoCausal, exercise._check_causal, r"sees the future"),
            (transformer_answers.TransformerNoPadding, exercise._check_padding, r"padding leaks"))
    for impl, check, match in bugs:
        torch.manual_seed(0)
        model = transformer._build_transformer(impl, case, "Transformer", device)
        with pytest.raises(AssertionError, match=match):
            check(model, src, tgt, case)


# ---------------------------------------------------------------- one wording on both sides

DECODING = [e for e in declared("10.6", load_solution_namespace(ASSIGNMENT))
            if e.exercise == "greedy_decode" and not e.correct and e.hidden and not e.grading_only]


@pytest.mark.parametrize("entry", DECODING, ids=lambda e: f"{e.exercise}: {e.label}")
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
