"""``beam_search``: the exercise and its visible check, on scripted tables, seeded random logits and a
stand-in Transformer with a padded source; its known mistakes and the messages both sides give.

This module ships no search: :data:`EXPECTED` holds, for each visible case, the best hypothesis,
its score, and what each known mistake returns where it differs, as grading's search computes them
(a test holds the two equal).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    close_score,
    generator,
    passed,
    visible_check,
)
from course.checking.standins import expect_token_ids, stand_in
from course.translation import BOS, EOS

NAME = "beam_search"
RULE = ("At each step extend every unfinished hypothesis by every token, keep the beam_size best extensions, "
        "and move those that end in eos_id to the finished set: fewer than beam_size may stay unfinished, "
        "and the next step again keeps the beam_size best extensions of those.")
FINISHED_COMPETE = Mistake("finished_compete", "finished hypotheses kept in the beam, taking slots from the "
                           "unfinished ones", RULE)
LENGTH_NORM = Mistake("length_norm", "hypotheses ranked by their mean log-probability per token (a length "
                      "penalty)", "The contract ranks by the sum of the log-probabilities, with no "
                                  "length penalty.")
NO_REFILL = Mistake("no_refill", "a beam that shrinks by one for every finished hypothesis", RULE)
DROP_FINISHED = Mistake("drop_finished", "finished hypotheses thrown away",
                        "Keep every hypothesis that ends in eos_id in a finished set, and return the "
                        "best of the finished and the unfinished ones.")
RAW_LOGITS = Mistake("raw_logits", "hypotheses scored with the raw logits",
                     "Logits are not log-probabilities: add the log-softmax of the last position's logits to "
                     "each hypothesis' score.")
GREEDY = Mistake("greedy", "beam_size ignored: the greedy choice at every step",
                 "Keep the beam_size best extensions of all hypotheses, not one.")
STEP_RANK = Mistake("step_rank", "extensions ranked by the log-probability of their last token alone",
                    "Rank an extension by its total score: its hypothesis' score plus the new token's "
                    "log-probability.")
FINISHED_EXTENDED = Mistake("finished_extended", "finished hypotheses left in the beam and extended past "
                            "eos_id (cut at eos_id only at the end)", RULE)
WIDE_BEAM = Mistake("wide_beam", "a beam wider than the extensions there are",
                    "When beam_size is larger than the number of extensions (k × vocab), keep them all: "
                    "ask topk for no more than there are.")
#: The mistakes a wrong hypothesis is compared with. One is named only when it alone returns the
#: learner's ids (and, where several do, their score): a search whose hypothesis several mistakes
#: return gets the rule, not a guess.
MISTAKES = (FINISHED_COMPETE, FINISHED_EXTENDED, LENGTH_NORM, NO_REFILL, DROP_FINISHED, RAW_LOGITS, GREEDY,
            STEP_RANK)
#: A mistake that is a special case of another: where both fit, the general one is named (it is true
#: of both).
SPECIAL_CASE_OF = {FINISHED_EXTENDED: FINISHED_COMPETE}


class TableModel(nn.Module):
    """A scripted translator with the notebook's interface (encode, decode, forward, pad_id), for one
    sentence: the logits after a prefix (the tokens after <bos>) come from ``table``, or else from
    ``otherwise``, or else are seeded random logits drawn from the prefix.

    ``table`` maps a prefix (a tuple) to {token: probability}; the mass left over is spread over
    the other tokens. ``damp`` adds to a token's random logits (makes it unlikely). Every prefix's
    logits are shifted by a seeded constant: only log-softmax gives log-probabilities.
    """

    def __init__(self, vocab: int, seed: int, table: Mapping | None = None, otherwise: Mapping | None = None,
                 damp: Mapping[int, float] | None = None, pad_id: int = 0):
        super().__init__()
        self.vocab, self.seed, self.table, self.otherwise = vocab, seed, dict(table or {}), otherwise
        self.damp, self.pad_id = dict(damp or {}), pad_id
        self.anchor = nn.Parameter(torch.zeros(1, dtype=torch.float64))  # the model's device

    def logits_for(self, prefix: tuple[int, ...]) -> torch.Tensor:
        """float64 logits (vocab,) for the next token after <bos> + prefix."""
        key = self.seed
        for token in prefix:
            key = (key * 1_000_003 + token + 1) % 2**61
        g = generator(key)
        shift = float(torch.rand((), generator=g, dtype=torch.float64)) * 6 - 3
        # Every tensor placed on the CPU by name: the device probe moves a learner's
        # unplaced tensors to 'meta', and must not move the model's own.
        given = self.table.get(prefix, self.otherwise)
        if given is not None:
            rest = (1.0 - sum(given.values())) / max(1, self.vocab - len(given))
            probs = torch.tensor([given.get(w, rest * (1 + w / 100)) for w in range(self.vocab)],
                                 dtype=torch.float64, device="cpu")  # the rest a little uneven: no ties
            return probs.clamp_min(1e-12).log() + shift
        logits = torch.randn(self.vocab, generator=g, dtype=torch.float64, device="cpu") + shift
        for token, amount in self.damp.items():
            logits[token] += amount
        return logits

    def encode(self, src, src_mask=None):
        return src[:, :, None].to(self.anchor.dtype).expand(-1, -1, 4)  # (B, n_src, 4), unused

    def decode(self, tgt, memory, src_mask=None):
        k, n = tgt.shape
        logits = torch.empty(k, n, self.vocab, dtype=torch.float64, device="cpu")  # (k, n, vocab)
        for i, row in enumerate(tgt.tolist()):
            for j in range(n):
                logits[i, j] = self.logits_for(tuple(row[1: j + 1]))
        return logits.to(self.anchor.device)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


A, B_, C, D = 3, 4, 5, 6  # words of the scripted tables (pad 0, <bos> 1, <eos> 2)
AFTER = {EOS: 1.0}  # the scripted tables' next word after any prefix they do not list
TABLES = {  # prefix (the words after <bos>) -> next-word probabilities
    "greedy misses": {(): {A: 0.5, B_: 0.4, EOS: 0.1}, (A,): {A: 0.4, B_: 0.3, EOS: 0.3},
                      (B_,): {EOS: 0.9, A: 0.05, B_: 0.05}},
    "refill": {(): {A: 0.66, EOS: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, EOS: 0.02},
               (A, B_): {EOS: 0.95, A: 0.05}, (A, C): {EOS: 0.1, A: 0.31, B_: 0.3, C: 0.29}},
    "short wins": {(): {A: 0.55, EOS: 0.45}, (A,): {B_: 0.9, EOS: 0.1}, (A, B_): {C: 0.9, EOS: 0.1},
                   (A, B_, C): {EOS: 0.9, A: 0.1}},
    "kept finished": {(): {A: 0.7, EOS: 0.3}, (A,): {A: 0.51, B_: 0.49}, (A, A): {C: 0.52, D: 0.48},
                      (A, B_): {C: 0.53, D: 0.47}},
}


def beam_case(name: str, seed: int, kind: str, max_len: int, beam_size: int, bos: int = BOS, eos: int = EOS,
              **model) -> Case:
    """A case: the search's arguments and its model, ``model`` giving a table model's ``vocab``
    (``table``, ``otherwise``, ``damp``) or a stand-in Transformer's ``layers``, ``short`` and
    ``n_src``. Kinds: "scripted table", "random logits", "max_len reached", "a beam wider than the
    extensions", "bos_id and eos_id not 1 and 2", "a Transformer, a padded source"."""
    return Case(name, seed, {"bos": bos, "eos": eos, "max_len": max_len, "beam_size": beam_size, **model},
                kind=kind)


def scripted(name: str, seed: int, table: str, max_len: int, beam_size: int, kind="scripted table") -> Case:
    return beam_case(name, seed, kind, max_len, beam_size, vocab=7, table=TABLES[table], otherwise=AFTER)


CASES = [
    scripted("beam_size=2 finds <bos> 4 <eos> (0.4 · 0.9 = 0.36), which greedy decoding misses", 11,
             "greedy misses", 6, 2),
    beam_case("random logits, beam_size=3: ranked by the total score, no length penalty, finished ones apart",
              194, "random logits", 5, 3, vocab=5),
    beam_case("random logits, beam_size=2: <bos> <eos> wins if finished hypotheses take no slot", 127,
              "random logits", 5, 2, vocab=5),
    scripted("beam_size=1 is greedy decoding: <bos> 3 3 <eos> (0.5 · 0.4 = 0.2)", 12, "greedy misses", 6, 1),
    scripted("max_len=2: <bos> and one word", 13, "greedy misses", 2, 2, kind="max_len reached"),
    scripted("the beam refills after <eos>: <bos> 3 4 <eos> (0.66 · 0.48 · 0.95) beats <bos> <eos> (0.25)",
             14, "refill", 6, 2),
    scripted("no length penalty: <bos> <eos> (0.45) beats <bos> 3 4 5 <eos> (0.55 · 0.9 · 0.9 · 0.9)", 15,
             "short wins", 6, 2),
    scripted("a finished <bos> <eos> (0.3) stays finished while the beam goes on", 16, "kept finished", 6, 2),
    scripted("beam_size=10, more than the 7 extensions of the first step: still <bos> 4 <eos>", 17,
             "greedy misses", 6, 10, kind="a beam wider than the extensions"),
    beam_case("random logits, beam_size=3", 59, "random logits", 7, 3, vocab=6),
    beam_case("<eos> unlikely: every hypothesis reaches max_len=5", 22, "max_len reached", 5, 2, vocab=5,
              damp={EOS: -6.0}),
    beam_case("beam_size=16, every hypothesis of 3 words: the best of all", 23,
              "a beam wider than the extensions", 4, 16, vocab=4),
    beam_case("bos_id=6, eos_id=5, beam_size=3", 42, "bos_id and eos_id not 1 and 2", 6, 3, bos=6, eos=5,
              vocab=8),
    beam_case("a stand-in Transformer (pre-norm, 2 + 2 blocks), a source with 2 pads, beam_size=3", 42,
              "a Transformer, a padded source", 8, 3, eos=4, layers=(2, 2), short=[2], n_src=6,
              norm_first=True),
]


def goes_on_after_eos(eos: int, where: str) -> str:
    return (f"{NAME} returned a hypothesis that goes on after eos_id={eos} in {where}: a hypothesis "
            "that ends in eos_id is finished; it is not extended.")


def not_the_best(where: str, mistake: Mistake | None) -> CheckFailure:
    return CheckFailure(f"{NAME} did not return the best hypothesis of the search in {where}.\n" + (
        mistake.sentence() if mistake else
        f"{RULE} Stop when the best finished score is at least the best unfinished one."), mistake)


def wrong_score(score: float, want: float, where: str, raw_logits: bool = False) -> CheckFailure:
    """The right sentence with the wrong score ``score`` (the log-probability ``want``)."""
    hint = ""
    if math.isclose(score, math.exp(want), rel_tol=1e-4, abs_tol=1e-6):
        hint = " It looks like a probability: return the sum of the log-probabilities instead."
    elif raw_logits:
        hint = f" {RAW_LOGITS.sentence()}"
    return CheckFailure(f"{NAME} found the right sentence but its score is {score:.4g} instead of "
                        f"{want:.4g} in {where}: the score is the sum of the log-probabilities (log-softmax "
                        "of the logits) of every token after bos_id." + hint,
                        RAW_LOGITS if raw_logits else None)


def expect_ids_and_score(result, where: str):
    if not isinstance(result, tuple) or len(result) != 2:
        raise CheckFailure(f"{NAME} should return a pair (ids, score), but returned {type(result).__name__} "
                           f"in {where}.")
    ids, score = result
    if isinstance(score, torch.Tensor):
        raise CheckFailure(f"{NAME}'s score should be a Python float, as the contract says, but is a tensor "
                           f"in {where}: return score.item() (or float(score)).")
    try:
        return ids, float(score)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailure(f"{NAME}'s score should be a number (a float), but is a {type(score).__name__} "
                           f"in {where}.") from None


def beam_outputs(ids: list[int], score: float, **more: float) -> dict[str, torch.Tensor]:
    """Outputs: ``ids`` (1, n) and ``score`` (and ``more`` scores), float64 tensors."""
    scores = {"score": score, **more}
    return {"ids": torch.tensor([ids], dtype=torch.float64),
            **{key: torch.tensor(value, dtype=torch.float64) for key, value in scores.items()}}


def same_ids(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a.cpu(), b.cpu())


def _snapshot(case: Case, kind: str):
    """The :data:`EXPECTED` outputs ``kind`` (the reference, or a mistake's name) of ``case``; None
    for a mistake that returns the reference's ids there."""
    entry = EXPECTED[case.name].get(kind)
    return None if entry is None else beam_outputs(**entry)


def beam_model(case: Case, device) -> tuple[nn.Module, torch.Tensor]:
    """The case's model (a table model, or a stand-in Transformer) and its one-sentence source (1, n_src)."""
    p = case.params
    if "layers" in p:
        model, src = stand_in(case)
        return model.to(device), src.to(device)
    model = TableModel(p["vocab"], case.seed, p.get("table"), p.get("otherwise"), p.get("damp"))
    return model.to(device), torch.tensor([[7, 5, 6]], device=device)


class BeamSearch(Exercise):
    name = NAME
    reference_name = "beam search as the contract defines it"
    mistakes = {m: (lambda case, device, m=m: _snapshot(case, m.name)) for m in MISTAKES}
    visible_cases = CASES

    def model(self, case: Case, device) -> tuple[nn.Module, torch.Tensor]:
        return beam_model(case, device)

    def run(self, impl, case, device):
        p, where = case.params, str(case)
        model, src = self.model(case, device)
        try:
            result = self.call(case, impl, model, src, p["bos"], p["eos"], p["max_len"],
                               beam_size=p["beam_size"])
        except CheckFailure as failure:
            if p["beam_size"] <= p.get("vocab", p["beam_size"]) or failure.__cause__ is None:
                raise
            raise CheckFailure(f"{failure}\n{WIDE_BEAM.sentence()}", WIDE_BEAM) from failure.__cause__
        ids, score = expect_ids_and_score(result, where)
        (row,) = expect_token_ids(ids, f"{NAME}'s ids", 1, p["bos"], p["max_len"], where)
        return beam_outputs(row, score)

    def reference(self, case, device):
        """The best ids, their score and their score summed from the raw logits."""
        return _snapshot(case, "reference")

    def evaluate(self, case, got, device):
        want, where = self.expected(case, device), str(case)
        ids, score = got["ids"], float(got["score"])
        if same_ids(ids, want["ids"]) and close_score(score, float(want["score"])):
            return
        if (ids[0, 1:-1] == case.params["eos"]).any():
            raise CheckFailure(goes_on_after_eos(case.params["eos"], where))
        if same_ids(ids, want["ids"]):
            raise wrong_score(score, float(want["score"]), where, close_score(score, float(want["raw"])))
        raise not_the_best(where, self.diagnose(case, ids, device, score))

    def diagnose(self, case: Case, ids: torch.Tensor, device, score: float | None = None) -> Mistake | None:
        """The known mistake that alone returns ``ids`` (not the reference's) on ``case``: where several
        do, those whose score is ``score`` too; a special case gives way to its general mistake; None
        unless one is left."""
        variants = {mistake: run(case, device) for mistake, run in self.mistakes.items()}
        fits = [m for m, v in variants.items() if v is not None and same_ids(v["ids"], ids)]
        if len(fits) > 1 and score is not None:
            fits = [m for m in fits if close_score(score, float(variants[m]["score"]))] or fits
        named = {SPECIAL_CASE_OF[m] if SPECIAL_CASE_OF.get(m) in fits else m for m in fits}
        if len(named) == 1:
            (mistake,) = named
            return mistake
        return None


@visible_check
def check_beam_search(beam_search) -> None:
    """On scripted tables whose best hypotheses are known, on random logits, other bos and eos ids and
    a stand-in Transformer: the ids and the score (a sum of log-probabilities), the finished set, the
    refill, no length penalty, max_len, beam_size=1 and a beam wider than the extensions."""
    BeamSearch().run_cases(beam_search)
    passed("beam_search finds what greedy misses, keeps finished sentences apart, scores log-probabilities.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": {ids, score, raw}, mistake name:
#: {ids, score} where that mistake returns other ids}}.
EXPECTED: dict[str, dict[str, dict]] = {
    'beam_size=2 finds <bos> 4 <eos> (0.4 · 0.9 = 0.36), which greedy decoding misses': {
        'reference': {'ids': [1, 4, 2], 'score': -1.02165124754, 'raw': -2.53575319746},
        'drop_finished': {'ids': [1, 3, 3, 0, 0, 0], 'score': -84.5025012602},
        'raw_logits': {'ids': [1, 3, 2], 'score': -0.756295068607},
        'greedy': {'ids': [1, 3, 3, 2], 'score': -1.60943791245},
    },
    'random logits, beam_size=3: ranked by the total score, no length penalty, finished ones apart': {
        'reference': {'ids': [1, 2], 'score': -1.88698753508, 'raw': 1.53965598066},
        'finished_extended': {'ids': [1, 3, 3, 2], 'score': -2.78039154806},
        'length_norm': {'ids': [1, 3, 3, 1, 2], 'score': -3.43218370246},
        'drop_finished': {'ids': [1, 3, 0, 4, 0], 'score': -3.86170348862},
        'raw_logits': {'ids': [1, 3, 3, 2], 'score': 7.01006364762},
        'greedy': {'ids': [1, 3, 0, 4, 2], 'score': -3.66157260653},
        'step_rank': {'ids': [1, 1, 2], 'score': -2.69346164106},
    },
    'random logits, beam_size=2: <bos> <eos> wins if finished hypotheses take no slot': {
        'reference': {'ids': [1, 2], 'score': -2.25762311559, 'raw': 1.05066939613},
        'finished_compete': {'ids': [1, 0, 1, 2], 'score': -2.27040692547},
        'finished_extended': {'ids': [1, 0, 1, 2], 'score': -2.27040692547},
        'length_norm': {'ids': [1, 0, 3, 1, 1], 'score': -2.67232381346},
        'drop_finished': {'ids': [1, 0, 3, 1, 1], 'score': -2.67232381346},
        'raw_logits': {'ids': [1, 0, 3, 1, 1], 'score': 13.0134894694},
        'greedy': {'ids': [1, 0, 3, 1, 1], 'score': -2.67232381346},
        'step_rank': {'ids': [1, 0, 3, 1, 1], 'score': -2.67232381346},
    },
    'beam_size=1 is greedy decoding: <bos> 3 3 <eos> (0.5 · 0.4 = 0.2)': {
        'reference': {'ids': [1, 3, 3, 2], 'score': -1.60943791245, 'raw': 1.1765545359},
    },
    'max_len=2: <bos> and one word': {
        'reference': {'ids': [1, 3], 'score': -0.693147180564, 'raw': 0.714071582814},
    },
    'the beam refills after <eos>: <bos> 3 4 <eos> (0.66 · 0.48 · 0.95) beats <bos> <eos> (0.25)': {
        'reference': {'ids': [1, 3, 4, 2], 'score': -1.20077791344, 'raw': -5.05006278016},
        'no_refill': {'ids': [1, 2], 'score': -1.38629436112},
        'drop_finished': {'ids': [1, 3, 5, 3, 0, 0], 'score': -57.5418878379},
        'raw_logits': {'ids': [1, 2], 'score': -1.05053637536},
        'greedy': {'ids': [1, 3, 5, 3, 2], 'score': -2.27984560604},
    },
    'no length penalty: <bos> <eos> (0.45) beats <bos> 3 4 5 <eos> (0.55 · 0.9 · 0.9 · 0.9)': {
        'reference': {'ids': [1, 2], 'score': -0.798507696223, 'raw': -1.52669292958},
        'length_norm': {'ids': [1, 3, 4, 5, 2], 'score': -0.913918547749},
        'drop_finished': {'ids': [1, 3, 4, 5, 3, 0], 'score': -30.742164241},
        'raw_logits': {'ids': [1, 3, 4, 5, 2], 'score': 4.16773872823},
        'greedy': {'ids': [1, 3, 4, 5, 2], 'score': -0.913918547749},
        'step_rank': {'ids': [1, 3, 4, 5, 2], 'score': -0.913918547749},
    },
    'a finished <bos> <eos> (0.3) stays finished while the beam goes on': {
        'reference': {'ids': [1, 2], 'score': -1.20397280433, 'raw': -2.40319538813},
        'finished_compete': {'ids': [1, 3, 3, 5, 2], 'score': -1.68394596463},
        'finished_extended': {'ids': [1, 3, 3, 5, 2], 'score': -1.68394596463},
        'length_norm': {'ids': [1, 3, 3, 5, 2], 'score': -1.68394596463},
        'drop_finished': {'ids': [1, 3, 3, 5, 2], 'score': -1.68394596463},
        'raw_logits': {'ids': [1, 3, 3, 6, 2], 'score': 0.556381222518},
        'greedy': {'ids': [1, 3, 3, 5, 2], 'score': -1.68394596463},
        'step_rank': {'ids': [1, 3, 4, 5, 2], 'score': -1.70490310427},
    },
    'beam_size=10, more than the 7 extensions of the first step: still <bos> 4 <eos>': {
        'reference': {'ids': [1, 4, 2], 'score': -1.02165124754, 'raw': 0.117893889197},
        'drop_finished': {'ids': [1, 3, 3, 0, 0, 0], 'score': -84.5025012602},
        'greedy': {'ids': [1, 3, 3, 2], 'score': -1.60943791245},
        'step_rank': {'ids': [1, 0, 2], 'score': -27.6310211159},
    },
    'random logits, beam_size=3': {
        'reference': {'ids': [1, 5, 5, 2], 'score': -2.75488002419, 'raw': 0.104127950135},
        'finished_extended': {'ids': [1, 3, 1, 5, 4, 3, 2], 'score': -5.35711118041},
        'drop_finished': {'ids': [1, 3, 1, 5, 4, 5, 1], 'score': -5.66954656017},
        'raw_logits': {'ids': [1, 3, 1, 5, 4, 4, 4], 'score': 7.45938962336},
        'greedy': {'ids': [1, 3, 1, 5, 4, 5, 2], 'score': -5.62948101357},
        'step_rank': {'ids': [1, 1, 1, 4, 0, 2], 'score': -4.87992298446},
    },
    '<eos> unlikely: every hypothesis reaches max_len=5': {
        'reference': {'ids': [1, 4, 4, 1, 3], 'score': -3.42118519484, 'raw': 1.32846766018},
        'raw_logits': {'ids': [1, 4, 0, 0, 3], 'score': 5.51438225024},
        'greedy': {'ids': [1, 4, 4, 4, 1], 'score': -3.55478579786},
        'step_rank': {'ids': [1, 1, 1, 1, 0], 'score': -3.60362102529},
    },
    'beam_size=16, every hypothesis of 3 words: the best of all': {
        'reference': {'ids': [1, 3, 0, 2], 'score': -1.56105268612, 'raw': 5.06700256276},
        'drop_finished': {'ids': [1, 3, 0, 3], 'score': -2.26421934048},
        'step_rank': {'ids': [1, 3, 3, 2], 'score': -2.93928905883},
    },
    'bos_id=6, eos_id=5, beam_size=3': {
        'reference': {'ids': [6, 2, 3, 5], 'score': -4.21272561093, 'raw': 3.72107383444},
        'length_norm': {'ids': [6, 0, 1, 4, 6, 5], 'score': -5.21564603606},
        'drop_finished': {'ids': [6, 0, 1, 4, 6, 4], 'score': -5.60349256981},
        'raw_logits': {'ids': [6, 2, 7, 2, 7, 6], 'score': 11.4032335789},
        'greedy': {'ids': [6, 2, 7, 3, 3, 0], 'score': -5.89303319626},
        'step_rank': {'ids': [6, 2, 7, 2, 7, 6], 'score': -6.2717232928},
    },
    'a stand-in Transformer (pre-norm, 2 + 2 blocks), a source with 2 pads, beam_size=3': {
        'reference': {'ids': [1, 9, 9, 9, 4], 'score': -1.20133568106, 'raw': 41.835636651},
        'length_norm': {'ids': [1, 9, 9, 9, 9, 9, 9, 4], 'score': -1.91476183913},
        'no_refill': {'ids': [1, 9, 9, 9, 9, 9, 9, 4], 'score': -1.91476183913},
        'drop_finished': {'ids': [1, 9, 9, 9, 9, 9, 9, 9], 'score': -2.40242672761},
        'raw_logits': {'ids': [1, 9, 9, 9, 9, 9, 9, 4], 'score': 71.1814863617},
        'greedy': {'ids': [1, 9, 9, 9, 9, 9, 9, 4], 'score': -1.91476183913},
        'step_rank': {'ids': [1, 1, 9, 9, 9, 9, 9, 4], 'score': -7.95588658719},
    },
}
