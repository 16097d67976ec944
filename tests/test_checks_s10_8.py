"""The 10.8 checks beyond "this answer passes, that bug fails" (those are declared in
tests/answers/s10_8/): registration, records, the decoding cases and their models, the snapshot the
visible next_token_probs check ships, the sampling check's watching of the learner's loop, the
visible tests' wording of what grading says, and what the student release holds (nothing that earns
these exercises' points)."""

from __future__ import annotations

import inspect
import math
import re

import pytest
import torch

import course
from course.checking import CheckFailure, single_thread
from course.checking.standins import stand_in
from course.visible.s10_6.greedy_decode import until_eos
from course.visible.s10_8 import beam_search as visible_beam
from course.visible.s10_8 import greedy_decode_cached as visible_cached
from course.visible.s10_8 import next_token_probs, sample
from course.visible.s10_8.next_token_probs import logits_of as _logits
from course.visible.s10_8.next_token_probs import options_of as _options
from grader.checks import s10_8
from grader.checks.s10_8 import beam_search, greedy_decode_cached
from grader.checks.s10_8 import next_token_probs as probs_check
from grader.checks.s10_8.next_token_probs import GradedNextTokenProbs as NextTokenProbs
from grader.checks.s10_8.next_token_probs import contract_probs
from tests import catalogue
from tests.answers.s10_8.greedy_decode_cached import reference_greedy
from tests.check_helpers import assert_records_verify, assert_registered

ASSIGNMENT = "10.8-decoding"
NAMES = ("greedy_decode_cached", "beam_search", "next_token_probs", "sample", "grouped_query_attention")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    with single_thread():
        yield


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.8 exercise by name?"""
    assert_registered("10.8", s10_8, NAMES)


@pytest.mark.slow  # a fresh Python importing torch
def test_records_verify_in_a_clean_process(tmp_path, monkeypatch, solution):
    """Do the solution's saved records pass the clean-process verification?"""
    assert_records_verify(s10_8, NAMES, solution, tmp_path, monkeypatch)


# ---------------------------------------------------------------- the decoding cases


CACHED_CASES = [*visible_cached.CASES, *greedy_decode_cached.CASES]


@pytest.mark.parametrize("case", CACHED_CASES, ids=str)
def test_cached_cases_are_decisive(case):
    """Is every greedy choice of a case clear (no near-ties that rounding could flip), does grading's
    cached decoder agree with plain greedy decoding, and do the sentences of a batch end at
    different steps (or, in a "max_len reached" case, does one not end)?"""
    p = case.params
    model, src = stand_in(case)
    ys, margin = reference_greedy(model, src, p["bos"], p["eos"], p["max_len"])
    assert margin > (1e-2 if case.dtype == torch.float32 else 1e-3)
    assert torch.equal(greedy_decode_cached.cached_greedy(model, src, p["bos"], p["eos"], p["max_len"]), ys)
    ends = [next((i for i, w in enumerate(row) if i and w == p["eos"]), None) for row in ys.tolist()]
    assert (None in ends) == ("max_len" in case.name), ends
    assert len(set(ends)) >= min(len(ys), 3), ends


def test_cached_cases_cover_padding_pre_norm_and_float32():
    """Do grading's cases include padded batches, pre-norm, GELU, another pad_id and float32, and
    does the shared cache change the ids of every case with two decoder blocks (else grading could
    not name it there)?"""
    cases = greedy_decode_cached.CASES
    assert any(any(c.params["short"]) for c in cases)
    assert any(c.params.get("norm_first") for c in cases)
    assert any(c.params.get("activation") == "gelu" for c in cases)
    assert any(c.params.get("pad") for c in cases)
    assert any(c.dtype == torch.float32 for c in cases)
    for case in cases:
        p = case.params
        if p["layers"][1] > 1:
            model, src = stand_in(case)
            ys = greedy_decode_cached.cached_greedy(model, src, p["bos"], p["eos"], p["max_len"])
            shared = greedy_decode_cached.cached_greedy(model, src, p["bos"], p["eos"], p["max_len"],
                                                        shared_cache=True)
            assert not torch.equal(until_eos(shared, p["eos"]), until_eos(ys, p["eos"])), case.name


def test_exhaustive_case_is_exhaustive():
    """Is the wide beam as wide as every hypothesis, so that it must find the exhaustive optimum,
    and is greedy wrong there (the case would prove nothing otherwise)?"""
    case = next(c for c in beam_search.BEAM_CASES if c.params.get("exhaustive"))
    p = case.params
    model, src = beam_search.beam_model(case, torch.device("cpu"))
    assert p["beam_size"] >= p["vocab"] ** (p["max_len"] - 2)
    best = beam_search.exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
    assert beam_search.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"]) == best
    assert beam_search.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], 1)[0] != best[0]


def test_scripted_cases_show_what_their_names_say():
    """Is greedy wrong in the first case, and does the refill case need the refill?"""
    device = torch.device("cpu")
    greedy_case = beam_search.BEAM_CASES[0]
    refill_case = next(c for c in beam_search.BEAM_CASES if "refills" in c.name)
    for case, switch in ((greedy_case, {"width": 1}), (refill_case, {"no_refill": True})):
        p = case.params
        model, src = beam_search.beam_model(case, device)
        right = beam_search.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"])
        assert right == beam_search.exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
        wrong = beam_search.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"],
                                           **switch)
        assert wrong != right


@pytest.mark.parametrize("cases", [visible_beam.CASES, beam_search.BEAM_CASES], ids=["visible", "hidden"])
def test_beam_mistakes_first_fail_where_they_alone_fit(cases):
    """Does each known beam mistake first change the answer on a case where no other mistake returns
    the same hypothesis (or only the general mistake it is a special case of), so that both sides
    name it (a finished hypothesis left in the beam, ranking by the last token, a length penalty)?"""
    device = torch.device("cpu")
    for mistake, switch in beam_search.SWITCHES.items():
        for case in cases:
            model, src = beam_search.beam_model(case, device)
            right = beam_search.search(case, model, src)
            wrong = beam_search.search(case, model, src, **switch)
            if wrong[0] == right[0]:
                continue
            fits = {m for m, s in beam_search.SWITCHES.items()
                    if beam_search.search(case, model, src, **s) == wrong}
            named = {visible_beam.SPECIAL_CASE_OF[m] if visible_beam.SPECIAL_CASE_OF.get(m) in fits else m
                     for m in fits}
            assert named == {mistake} or (mistake in visible_beam.SPECIAL_CASE_OF and
                                          named == {visible_beam.SPECIAL_CASE_OF[mistake]}), (mistake, case)
            break
        else:
            raise AssertionError(f"no case shows {mistake.name}")


def test_visible_beam_snapshot_is_the_hidden_search():
    """Are the hypotheses the visible beam_search check ships (the best, its scores, each mistake's
    where it differs) what grading's search finds today? If not, paste
    grader.checks.s10_8.beam_search.snapshot() into course/visible/s10_8/beam_search.py (EXPECTED)."""
    fresh = beam_search.snapshot()
    assert fresh.keys() == visible_beam.EXPECTED.keys()
    for case, entry in fresh.items():
        assert entry.keys() == visible_beam.EXPECTED[case].keys(), case
        for kind, values in entry.items():
            shipped = visible_beam.EXPECTED[case][kind]
            assert shipped["ids"] == values["ids"], (case, kind)
            for key in values.keys() - {"ids"}:
                assert shipped[key] == pytest.approx(values[key], rel=1e-11, abs=1e-12), (case, kind, key)


def test_visible_beam_cases_show_what_they_test():
    """Do the visible cases' best hypotheses match the probabilities their names give, is every wide
    beam as wide as every hypothesis (so the best is the exhaustive one), does each known mistake change
    the answer of some case, and are the two sides' mistakes the same, in the same order?"""
    cpu = torch.device("cpu")
    assert list(beam_search.GradedBeamSearch.mistakes) == list(visible_beam.BeamSearch.mistakes)
    for case in visible_beam.CASES:
        reference = visible_beam.EXPECTED[case.name]["reference"]
        stated = re.findall(r"\(([\d.· ]+?) ?(?:= [\d.]+)?\)", case.name)  # "(0.4 · 0.9 = 0.36)"
        if stated:
            probability = math.prod(float(x) for x in stated[0].split("·"))
            assert reference["score"] == pytest.approx(math.log(probability)), case.name
        p = case.params
        if "vocab" in p and p["beam_size"] >= p["vocab"] ** (p["max_len"] - 2):
            model, _ = beam_search.beam_model(case, cpu)
            best = beam_search.exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
            assert best[0] == reference["ids"], case.name
    named = {kind for entry in visible_beam.EXPECTED.values() for kind in entry}
    assert named >= {m.name for m in visible_beam.MISTAKES}


# ---------------------------------------------------------------- next_token_probs: the snapshot, the cases


def test_visible_snapshot_is_the_hidden_reference():
    """Are the probabilities the visible check ships (the reference and each mistake where it differs)
    what grading's reference computes today? If not, paste grader.checks.s10_8.next_token_probs.snapshot()
    into course/visible/s10_8/next_token_probs.py (EXPECTED)."""
    fresh = probs_check.snapshot()
    assert fresh.keys() == next_token_probs.EXPECTED.keys()
    for case, entry in fresh.items():
        assert entry.keys() == next_token_probs.EXPECTED[case].keys(), case
        for kind, values in entry.items():
            if kind == next_token_probs.KEPT:  # numbers of tokens, row by row
                assert next_token_probs.EXPECTED[case][kind] == values, (case, kind)
                continue
            shipped = torch.tensor(next_token_probs.EXPECTED[case][kind], dtype=torch.float64)
            fresh_values = torch.tensor(values, dtype=torch.float64)
            assert torch.allclose(shipped, fresh_values, rtol=1e-11, atol=1e-12), (case, kind)


def test_visible_cases_include_top_k_of_v_or_more():
    """Does a visible case use a top_k equal to V and one above it (grading has both)?"""
    V = len(next_token_probs.ROWS[0])
    ks = {k for _, _, _, k, _, _ in next_token_probs.CASES if k is not None}
    assert V in ks and any(k > V for k in ks)
    hidden = {_options(c)["top_k"] - _logits(c, "cpu").shape[-1] for c in NextTokenProbs().cases()
              if _options(c)["top_k"] is not None}
    assert 0 in hidden and any(d > 0 for d in hidden)


def _top_p_margins(logits, T, k, p) -> float:
    """How far every token's strictly-more-likely mass (and that mass plus its own) is from p."""
    probs = torch.softmax(logits.double() / T, -1)
    if k is not None:
        probs = probs_check._renormalised(probs, probs_check._top_k(probs, k))
    mass = probs_check._strictly_ahead(probs)[1]
    return min((mass - p).abs().min().item(), (mass + probs - p).abs().min().item())


def test_top_p_cases_stay_clear_of_p():
    """Is no token of a top-p case within 1e-2 of p, so that a right answer's rounding never flips it?
    (But the cases built to sit exactly at p from log-probabilities, to test `< p` against `<= p`.)"""
    for _, lead, T, k, p, dtype in next_token_probs.CASES:
        if T and p is not None:
            assert _top_p_margins(next_token_probs.case_logits(lead, dtype), T, k, p) > 1e-2
    for case in NextTokenProbs().cases():
        o = _options(case)
        if o["temperature"] and o["top_p"] is not None:
            margin = _top_p_margins(_logits(case, "cpu"), o["temperature"], o["top_k"], o["top_p"])
            at_p = case.params["logits"][0] == "log" and margin < 1e-6  # log-probabilities built to sum to p
            assert margin > 1e-2 or at_p, case.name


def test_every_probability_mistake_shows_in_a_visible_case():
    """Does each known next_token_probs mistake change the result of at least one visible case?"""
    def probs(lead, T, k, p, dtype, **changes):
        return contract_probs(next_token_probs.case_logits(lead, dtype), T, k, p, **changes)

    for mistake, changes in probs_check.VARIANTS.items():
        differs = [case for case, *spec in next_token_probs.CASES
                   if not torch.allclose(probs(*spec, **changes), probs(*spec))]
        assert differs, mistake.name


def test_kept_counts_by_hand():
    """May an answer keep the tied tokens at a boundary together or cut them (exactly k; the smallest mass
    that reaches p), and nothing else?"""
    logits = torch.tensor([3.0, 1.0, 1.0, 0.5]).log()  # probabilities 0.6, 0.2, 0.2, 0.1 (/ 1.1)
    assert probs_check.kept_counts(logits, top_k=2) == [[2, 3]]
    assert probs_check.kept_counts(logits, top_p=0.7) == [[2, 3]]  # 0.55, then 0.73: the second 0.2 is past p
    assert probs_check.kept_counts(logits, top_k=3) == [[3]]
    assert probs_check.kept_counts(logits, temperature=0, top_k=2) is None
    assert probs_check.kept_counts(logits) is None


def test_tie_broken_by_hand():
    """Does the tie rule accept the most likely tokens, as many as allowed, renormalised, and only those?"""
    want = torch.tensor([[0.6, 0.2, 0.2, 0.0]], dtype=torch.float64)
    def accepts(row, counts):
        got = torch.tensor([row], dtype=torch.float64)
        return next_token_probs.tie_broken(got, want, [counts], 1e-7, 1e-9)

    assert accepts([0.6, 0.2, 0.2, 0.0], [2, 3])
    assert accepts([0.75, 0.25, 0.0, 0.0], [2, 3]) and accepts([0.75, 0.0, 0.25, 0.0], [2, 3])
    assert not accepts([0.75, 0.25, 0.0, 0.0], [3])  # too few
    assert not accepts([0.0, 0.5, 0.5, 0.0], [2, 3])  # the most likely dropped
    assert not accepts([0.7, 0.3, 0.0, 0.0], [2, 3])  # not renormalised from the probabilities
    assert not accepts([0.6, 0.2, 0.0, 0.2], [2, 3])  # a token the contract drops


def test_contract_probabilities_by_hand():
    """Top-k keeps ties with the k-th; top-p keeps the token that crosses p and ties together."""
    logits = torch.tensor([3.0, 1.0, 1.0, 0.0]).log()  # probabilities 3/5, 1/5, 1/5, 0
    probs = contract_probs(logits, top_k=2)
    assert torch.allclose(probs, torch.tensor([0.6, 0.2, 0.2, 0.0]))
    probs = contract_probs(logits, top_p=0.7)  # 0.6 < 0.7: both 0.2's kept
    assert torch.allclose(probs, torch.tensor([0.6, 0.2, 0.2, 0.0]))
    probs = contract_probs(logits, top_p=0.5)  # the most likely alone
    assert torch.allclose(probs, torch.tensor([1.0, 0.0, 0.0, 0.0]))
    greedy = contract_probs(torch.tensor([1.0, 2.0, 2.0]), temperature=0)
    assert greedy.tolist() == [0.0, 1.0, 0.0]


# ---------------------------------------------------------------- sample


def test_sample_cases_stop_early_and_truncate(solution):
    """Does a visible case stop before max_new_tokens with rows finishing at different steps, and does
    another feed the model more than max_len tokens unless it truncates?"""
    outs = {case[0]: sample.check_case(solution["sample"], case) for case in sample.SETTINGS}
    name, B, n0, max_new, *_, eos_id, _ = sample.SETTINGS[1]
    out = outs[name]
    assert out.shape[1] < n0 + max_new
    first_eos = [(row == eos_id).nonzero()[0].item() for row in out]
    assert len(set(first_eos)) > 1
    name, B, n0, max_new, *_ = sample.SETTINGS[2]
    assert n0 + max_new > sample.StandIn().max_len + 1


def test_stand_in_refuses_a_long_context():
    model = sample.StandIn(max_len=4)
    assert model(torch.zeros(2, 4, dtype=torch.long)).shape == (2, 4, 6)
    with pytest.raises(sample.ContextTooLong):
        model(torch.zeros(2, 5, dtype=torch.long))


def test_draws_are_watched_and_next_token_probs_restored():
    """Are multinomial calls counted with their generator, and the learner's next_token_probs put back?"""
    g = torch.Generator().manual_seed(0)
    probs = torch.full((2, 3), 1 / 3)
    with sample.Draws(g) as draws:
        torch.multinomial(probs, 1, generator=g)
        probs.multinomial(2)
    assert draws.calls == [(1, True), (2, False)]

    namespace = {"next_token_probs": "the learner's", "torch": torch}
    exec("def sample():\n    return next_token_probs\n\n"  # noqa: S102 - a notebook's functions
         "@torch.no_grad()\ndef decorated():\n    return next_token_probs", namespace)
    for function in (namespace["sample"], namespace["decorated"]):
        with sample.contract_next_token_probs(function):
            assert function() is sample.untied_probs
        assert function() == "the learner's"


# ---------------------------------------------------------------- one wording on both sides

DECODING = [e for e in catalogue.build() if e.section == "10.8"
            and e.exercise in ("greedy_decode_cached", "beam_search")
            and not e.correct and e.hidden and not e.grading_only and e.label != "one cache for all blocks"]


@pytest.mark.parametrize("entry", catalogue.params(DECODING))
def test_visible_test_says_what_grading_says(entry):
    """Does the visible test reject each decoding bug with the hidden check's words (the one wording
    of each message), so that a learner reads before grading what grading will say?"""
    failure = catalogue.run_visible(entry)
    assert re.search(entry.hidden, str(failure), flags=re.IGNORECASE), catalogue.message(failure)


# ---------------------------------------------------------------- what the release holds


def _shipped_functions():
    """Every function of the course package the release ships (the visible checks included)."""
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(course.__path__, "course."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isfunction(value) and value.__module__ == info.name:
                yield f"{info.name}.{name}", value


def test_no_shipped_function_earns_the_probabilities():
    """Does no function the release ships pass the visible or the hidden check of next_token_probs when
    handed in as the answer (contract_probs did)?"""
    from course.visible import s10_8 as visible

    for name, function in _shipped_functions():
        try:
            signature = inspect.signature(function)
            signature.bind(torch.zeros(3), 1.0, None, None)
        except (TypeError, ValueError):
            continue  # cannot even be called as next_token_probs
        for check in (visible.check_next_token_probs, s10_8.check_next_token_probs):
            with pytest.raises((CheckFailure, AssertionError)):
                check(function)
                pytest.fail(f"{name} passes {check.__module__}'s check of next_token_probs")
