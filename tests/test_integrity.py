"""Can a submission fool the hidden checks from inside the kernel?"""

import sys
import types

import pytest
import torch

from course.checking import outputs
from course.checking import records as record_files
from grader.autograde.worker import verify
from grader.checks import guarded_calls, integrity, s10_2
from tests.check_helpers import assert_fails

ASSIGNMENT = "10.2-scaled-dot-product-attention"


@pytest.fixture()
def records(tmp_path, monkeypatch):
    """Grading mode: checks save their records into a temporary folder."""
    monkeypatch.setenv(record_files.GRADING_DIR_ENV, str(tmp_path))
    return tmp_path


def wrong_softmax(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / (e.sum(dim, keepdim=True) + 0.1)


def test_clean_environment_has_no_tampering():
    """Does the scan stay quiet when nothing was replaced?"""
    assert integrity.tamper_report() == []


@pytest.mark.parametrize("target, name", [
    (torch, "allclose"), (torch.testing, "assert_close"), (torch, "isclose"),
])
def test_replaced_comparison_is_caught(monkeypatch, solution, target, name):
    """Does replacing a comparison function fail the check and say what was replaced?"""
    monkeypatch.setattr(target, name, lambda *args, **kwargs: True)
    assert_fails(s10_2.check_softmax, solution["softmax"], f"{name} was replaced")


def test_numpy_replacement_is_caught(monkeypatch):
    """Is numpy.allclose swapped for a lambda reported?"""
    import numpy

    monkeypatch.setattr(numpy, "allclose", lambda *args, **kwargs: True)
    assert "numpy.allclose was replaced" in integrity.tamper_report()


def test_fake_grading_module_is_caught(monkeypatch, solution):
    """Does a fake grader module in sys.modules fail the check?"""
    monkeypatch.setitem(sys.modules, "grader.checks.fake", types.ModuleType("grader.checks.fake"))
    assert_fails(s10_2.check_softmax, solution["softmax"], "is not the installed grader")


def test_edited_check_function_is_caught(monkeypatch):
    """Is a check library function replaced from outside the grader reported?"""
    fake = eval("lambda *args, **kwargs: True")  # defined outside grader/, like notebook code
    fake.__module__ = "grader.checks.guarded_calls"
    monkeypatch.setattr(guarded_calls, "close", fake)
    assert "grader.checks.guarded_calls.close was replaced" in integrity.tamper_report()


def test_torch_decorators_around_course_code_are_not_tampering(monkeypatch):
    """Is a course function under @torch.no_grad() left alone, and a fake one under it still caught?"""
    import course.gpt

    assert integrity.tamper_report() == []
    fake = torch.no_grad()(eval("lambda *args, **kwargs: 0.0"))  # outside course/, wrapped by torch
    fake.__module__ = "course.gpt"
    monkeypatch.setattr(course.gpt, "perplexity", fake)
    assert "course.gpt.perplexity was replaced" in integrity.tamper_report()


def test_record_round_trip_passes(records, solution):
    """Does a correct submission's record verify in a clean process?"""
    s10_2.check_softmax(solution["softmax"])
    verdicts = verify.verify_records(records)
    assert verdicts["softmax"].passed and not verdicts["softmax"].flags


def test_edited_comparison_is_caught_by_clean_verification(records, monkeypatch):
    """If learner code makes the in-kernel comparison lie, does clean verification catch it?"""
    monkeypatch.setattr(outputs, "close", lambda *args, **kwargs: True)  # what compare_outputs uses
    monkeypatch.setattr(integrity, "tamper_report", lambda: [])  # the cheat also silenced the scan
    s10_2.check_softmax(wrong_softmax)  # passes in the kernel: the comparison was neutralised
    monkeypatch.undo()  # the clean process has the real functions
    verdict = verify.verify_records(records)["softmax"]
    assert not verdict.passed
    assert "do not match the reference in a clean process" in verdict.reason


def test_forbidden_call_is_flagged_in_the_record(records):
    """Is calling the reference recorded as a flag for the grade report?"""
    assert_fails(s10_2.check_softmax, lambda x, dim=-1: torch.softmax(x, dim), "No credit")
    verdict = verify.verify_records(records)["softmax"]
    assert not verdict.passed
    assert any("torch.softmax" in flag for flag in verdict.flags)


def test_edited_record_is_caught(records, solution):
    """Does a record whose outputs were altered after the check fail verification?"""
    s10_2.check_softmax(solution["softmax"])
    path = records / record_files.record_name("softmax")
    record = record_files.load_record(path)
    first = next(iter(record["cases"].values()))
    first["output"] += 1.0
    torch.save(record, path)
    assert not verify.verify_records(records)["softmax"].passed


def test_no_record_outside_grading(tmp_path, monkeypatch, solution):
    """Does a learner running the notebook leave no record files behind?"""
    monkeypatch.delenv(record_files.GRADING_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    s10_2.check_softmax(solution["softmax"])
    assert list(tmp_path.iterdir()) == []
