"""Hidden check of ``greedy_decode``: on a scripted stand-in model whose next token follows a script
for each sentence (:class:`course.checking.standins.ScriptedModel`)."""

from __future__ import annotations

import torch

from course.checking.standins import expect_token_ids, scripted_batch
from course.visible.s10_6.greedy_decode import why_not_greedy, wrong_length
from grader.checks.exercise import Exercise, registered
from grader.checks.guarded_calls import Case, CheckFailure, call_learner


def until_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """float64 copy with everything after each row's first eos (after position 0) set to -1."""
    out = tokens.detach().to("cpu", torch.float64).clone()
    for row in out:
        hits = (row[1:] == eos).nonzero()
        if len(hits):
            row[int(hits[0]) + 2:] = -1
    return out


CASES = [
    Case("one sentence, <eos> after three words", 740,
         {"scripts": [[1, 7, 8, 9, 2]], "bos": 1, "eos": 2, "max_len": 10}),
    Case("three sentences of different lengths", 741,
         {"scripts": [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]], "bos": 1, "eos": 2,
          "max_len": 12}),
    Case("max_len reached before <eos>", 742,
         {"scripts": [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], "bos": 1, "eos": 2, "max_len": 5}),
    Case("bos_id=7, eos_id=4", 743, {"scripts": [[7, 5, 9, 5, 4], [7, 4]], "bos": 7, "eos": 4,
                                     "max_len": 8}),
    Case("an empty translation", 744, {"scripts": [[1, 2]], "bos": 1, "eos": 2, "max_len": 6}),
]


@registered
class GreedyDecode(Exercise):
    name = "greedy_decode"
    reference_name = "the greedy choices of a scripted model"

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = scripted_batch(p["scripts"], device)
        out = call_learner(self.name, self.forbidden, case, impl, model, src, p["bos"], p["eos"],
                           p["max_len"])
        expect_token_ids(out, "greedy_decode's result", src.shape[0], p["bos"], p["max_len"], str(case))
        return {"tokens": until_eos(out, p["eos"])}

    def reference(self, case, device):
        p = case.params
        rows = [s[: p["max_len"]] for s in p["scripts"]]
        n = max(len(r) for r in rows)
        return {"tokens": torch.tensor([r + [-1] * (n - len(r)) for r in rows], dtype=torch.float64)}

    def evaluate(self, case, got, device):
        p = case.params
        have, want = got["tokens"].to("cpu"), self.expected(case, device)["tokens"]
        n = have.shape[1]
        m = min(n, want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong):
            b, i = (int(v) for v in wrong[0])
            raise CheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy choice in "
                               f"{case}. "
                               f"{why_not_greedy(have[b].tolist(), want[b].tolist(), i)}")
        message = wrong_length(n, want.shape[1], p["eos"], p["max_len"], str(case))
        if message:
            raise CheckFailure(message)
