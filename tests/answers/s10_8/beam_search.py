"""beam_search: right answers written differently, and planted bugs (most of them the hidden check's
own search with one mistake switched on)."""

import math

import torch

from course.visible.s10_8.beam_search import (
    DROP_FINISHED,
    FINISHED_COMPETE,
    FINISHED_EXTENDED,
    GREEDY,
    LENGTH_NORM,
    NO_REFILL,
    RAW_LOGITS,
    STEP_RANK,
    WIDE_BEAM,
)
from grader.checks.s10_8.beam_search import reference_beam
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "beam_search"
#: Signature operators a right answer may run although none declared does, each with why
#: (tests/test_operator_walk.py).
ALLOWED_OPERATORS = dict.fromkeys(("aten.gather", "aten.sum"),
                                  "the score summed from the log-probabilities of the tokens: primitives")


def beam_lists(model, src, bos_id, eos_id, max_len, beam_size=4):
    """A right answer: Python lists of (ids, score), one model(src, ys) call per hypothesis, sorted()."""
    with torch.no_grad():
        alive, finished = [([bos_id], 0.0)], []
        while alive and len(alive[0][0]) < max_len:
            candidates = []
            for ids, score in alive:
                logits = model(src, torch.tensor([ids], device=src.device))[0, -1]
                logp = torch.log_softmax(logits.double(), -1)
                candidates += [(ids + [w], score + logp[w].item()) for w in range(len(logp))]
            candidates.sort(key=lambda c: -c[1])
            kept = candidates[:beam_size]
            finished += [c for c in kept if c[0][-1] == eos_id]
            alive = [c for c in kept if c[0][-1] != eos_id]
        best = max(finished + alive, key=lambda c: c[1])
        return torch.tensor([best[0]], device=src.device), best[1]


def beam_no_early_stop(model, src, bos_id, eos_id, max_len, beam_size=4):
    """A right answer: the solution's search without the early stop."""
    with torch.no_grad():
        mask = (src != model.pad_id)[:, None, None, :]
        memory = model.encode(src, mask)
        alive = src.new_full((1, 1), bos_id)
        scores = torch.zeros(1, dtype=torch.float64, device=src.device)
        done_ids, done_scores = [], []
        while len(alive) and alive.shape[1] < max_len:
            k = len(alive)
            logits = model.decode(alive, memory.expand(k, -1, -1), mask.expand(k, -1, -1, -1))[:, -1]
            total = (scores[:, None] + logits.double().log_softmax(-1)).flatten()
            best, index = total.topk(min(beam_size, len(total)))
            V = logits.shape[-1]
            ext = torch.cat([alive[index // V], (index % V)[:, None]], 1)
            end = ext[:, -1] == eos_id
            done_ids += list(ext[end])
            done_scores += list(best[end])
            alive, scores = ext[~end], best[~end]
        pool = list(zip(done_scores, done_ids)) + list(zip(scores, alive))
        score, ids = max(pool, key=lambda c: float(c[0]))
        return ids[None], float(score)


def beam_topk_unclipped(model, src, bos_id, eos_id, max_len, beam_size=4):
    """The search of beam_no_early_stop with topk(beam_size): fails when the beam is wider than the
    extensions there are."""
    with torch.no_grad():
        mask = (src != model.pad_id)[:, None, None, :]
        memory = model.encode(src, mask)
        alive = src.new_full((1, 1), bos_id)
        scores = torch.zeros(1, dtype=torch.float64, device=src.device)
        done = []
        while len(alive) and alive.shape[1] < max_len:
            k = len(alive)
            logits = model.decode(alive, memory.expand(k, -1, -1), mask.expand(k, -1, -1, -1))[:, -1]
            total = (scores[:, None] + logits.double().log_softmax(-1)).flatten()
            best, index = total.topk(beam_size)
            V = logits.shape[-1]
            ext = torch.cat([alive[index // V], (index % V)[:, None]], 1)
            end = ext[:, -1] == eos_id
            done += list(zip(best[end].tolist(), ext[end]))
            alive, scores = ext[~end], best[~end]
        score, ids = max(done + list(zip(scores.tolist(), alive)), key=lambda c: c[0])
        return ids[None], score


def left_in_beam(model, src, bos_id, eos_id, max_len, beam_size=4):
    """Finished hypotheses stay in the beam and are extended like the others; each hypothesis is
    cut at its first eos (and scored up to it) only at the end."""
    with torch.no_grad():
        mask = (src != model.pad_id)[:, None, None, :]
        memory = model.encode(src, mask)
        alive = src.new_full((1, 1), bos_id)
        steps = torch.zeros(1, 0, dtype=torch.float64, device=src.device)  # (k, t): each token's log-prob
        while alive.shape[1] < max_len:
            k = len(alive)
            logits = model.decode(alive, memory.expand(k, -1, -1), mask.expand(k, -1, -1, -1))[:, -1]
            logp = logits.double().log_softmax(-1)
            total = (steps.sum(1)[:, None] + logp).flatten()
            best, index = total.topk(min(beam_size, total.numel()))
            V = logp.shape[-1]
            rows = index // V
            steps = torch.cat([steps[rows], logp[rows, index % V][:, None]], 1)
            alive = torch.cat([alive[rows], (index % V)[:, None]], 1)
            if ((alive[:, 1:] == eos_id).any(1)).all():
                break
        cands = []
        for row, st in zip(alive.tolist(), steps):
            n = row.index(eos_id, 1) + 1 if eos_id in row[1:] else len(row)
            cands.append((float(st[:n - 1].sum()), row[:n]))
        s, row = max(cands, key=lambda c: c[0])
        return torch.tensor([row], device=src.device), s


def make_beam(**switch):
    """The check's reference search with one mistake switched on, as a learner's function."""
    def search(model, src, bos_id, eos_id, max_len, beam_size=4):
        ids, score = reference_beam(model, src, bos_id, eos_id, max_len, beam_size, **switch)
        return torch.tensor([ids], device=src.device), score
    return search


def beam_probability(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return ids, math.exp(score)


def beam_flat_ids(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return ids[0], score


def beam_past_eos(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return torch.cat([ids, ids.new_full((1, 1), eos_id)], 1)[:, :max_len], score


def score_as_tensor(search):
    """``search`` returning its score as a 0-d tensor: the contract says a float."""
    def beam(*args, **kwargs):
        ids, score = search(*args, **kwargs)
        return ids, torch.tensor(score, dtype=torch.float64, device=ids.device)
    return beam


def answers(solution):
    return [
        right("solution", solution["beam_search"]),
        right("beam_lists", beam_lists),
        right("beam_no_early_stop", beam_no_early_stop),
        bug("beam_size ignored", make_beam(width=1), hidden=r"beam_size ignored", mistake=GREEDY),
        bug("raw logits", make_beam(raw_logits=True), hidden=r"raw logits", mistake=RAW_LOGITS),
        bug("finished hypotheses take slots", make_beam(finished_compete=True), hidden=r"taking slots",
            mistake=FINISHED_COMPETE),
        bug("finished hypotheses left in the beam, extended", make_beam(left_in=True),
            hidden=r"extended past", mistake=FINISHED_EXTENDED),
        bug("left in the beam, cut at eos at the end (a loop)", left_in_beam, hidden=r"extended past",
            mistake=FINISHED_EXTENDED),
        bug("ranked by the last step's log-probability", make_beam(step_rank=True),
            hidden=r"last token alone", mistake=STEP_RANK),
        bug("the beam shrinks", make_beam(no_refill=True), hidden=r"shrinks by one", mistake=NO_REFILL),
        bug("finished hypotheses dropped", make_beam(drop_finished=True), hidden=r"thrown away",
            mistake=DROP_FINISHED),
        bug("length penalty", make_beam(length_norm=True),
            hidden=r"mean log-probability", mistake=LENGTH_NORM),
        bug("max_len without bos", make_beam(new_tokens=True), hidden=r"max_len counts every token"),
        bug("score as a probability", beam_probability, hidden=r"looks like a probability"),
        bug("score a 0-d tensor", score_as_tensor(solution["beam_search"]),
            hidden=r"score should be a Python float"),
        bug("1-D ids", beam_flat_ids, hidden=r"shape \(1, n\)"),
        bug("goes on after eos", beam_past_eos, hidden=r"goes on after eos_id"),
        bug("topk(beam_size) wider than the extensions", beam_topk_unclipped, hidden=r"raised RuntimeError",
            mistake=WIDE_BEAM),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["beam_search"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
