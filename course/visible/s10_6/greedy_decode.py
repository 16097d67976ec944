"""``greedy_decode(model, src, bos_id, eos_id, max_len)``: the exercise on a scripted stand-in model,
the explanations both sides give for a wrong token or a wrong length, and its visible check."""

from __future__ import annotations

import torch

from course.checking import Case, CheckFailure, Exercise, passed, visible_check
from course.checking.standins import OFF_SCRIPT, expect_token_ids, scripted_batch


def _case(name: str, seed: int, scripts: list, bos: int, eos: int, max_len: int, kind: str) -> Case:
    """A case: one script per sentence (the stand-in's greedy choices), bos_id, eos_id, max_len."""
    return Case(name, seed, {"scripts": scripts, "bos": bos, "eos": eos, "max_len": max_len}, kind=kind)


CASES = [
    _case("one sentence, <eos> after three words", 740, [[1, 7, 8, 9, 2]], 1, 2, 10, "one sentence"),
    _case("three sentences of different lengths", 741, [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]],
          1, 2, 12, "a batch"),
    _case("max_len reached before <eos>", 742, [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], 1, 2, 5,
          "max_len reached"),
    _case("bos_id=7, eos_id=4", 743, [[7, 5, 9, 5, 4], [7, 4]], 7, 4, 8, "other bos_id and eos_id"),
    _case("an empty translation", 744, [[1, 2]], 1, 2, 6, "an empty translation"),
]


def why_not_greedy(have: list, want: list, i: int) -> str:
    """What a decoded row says about the loop, from its first wrong token i."""
    generated = have[1:i + 1]
    if len(generated) > 1 and all(t == want[1] for t in generated):
        return ("It keeps predicting the same token: at each step feed everything generated so far "
                "(starting with bos_id) to the decoder, take the logits at the last position, [:, -1], "
                "and append their argmax.")
    if have[i] == OFF_SCRIPT:
        return ("The token does not follow from the tokens before it: at each step the decoder input must "
                "be the whole output so far, bos_id first, and the next token is the argmax of the logits at "
                "its last position.")
    return "Take the argmax over the vocabulary (dim=-1) of the logits at the last position."


def wrong_length(n: int, want: int, eos: int, max_len: int, where: str) -> str | None:
    """Why n tokens per sentence are not the greedy decoder's ``want`` (None when they are)."""
    if n > want:
        return (f"greedy_decode did not stop in {where}: every sentence had produced eos_id={eos} after "
                f"{want} "
                f"tokens, but the output has {n}. Stop as soon as every sentence in the batch has produced "
                "eos_id.")
    if n < want:
        return (f"greedy_decode stopped after {n} tokens in {where}, before every sentence had produced "
                f"eos_id={eos} (or max_len={max_len} was reached). Keep going until all sentences of "
                "the batch "
                "are finished.")
    return None


def until_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """float64 copy with everything after each row's first eos (after position 0) set to -1."""
    out = tokens.detach().to("cpu", torch.float64).clone()
    for row in out:
        hits = (row[1:] == eos).nonzero()
        if len(hits):
            row[int(hits[0]) + 2:] = -1
    return out


class GreedyDecode(Exercise):
    name = "greedy_decode"
    reference_name = "the greedy choices of a scripted model"
    visible_cases = CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = scripted_batch(p["scripts"], device)
        with torch.no_grad():
            out = self.call(case, impl, model, src, p["bos"], p["eos"], p["max_len"])
        expect_token_ids(out, "greedy_decode's result", src.shape[0], p["bos"], p["max_len"], str(case))
        return {"tokens": until_eos(out, p["eos"])}

    def reference(self, case, device):
        p = case.params
        rows = [s[: p["max_len"]] for s in p["scripts"]]
        n = max(len(r) for r in rows)
        return {"tokens": torch.tensor([r + [-1] * (n - len(r)) for r in rows], dtype=torch.float64)}

    def evaluate(self, case, got, device):
        """The first token that is not the script's, then the length, each with what it says."""
        p = case.params
        have, want = got["tokens"].to("cpu"), self.expected(case, device)["tokens"]
        n = have.shape[1]
        m = min(n, want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong):
            b, i = (int(v) for v in wrong[0])
            raise CheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy choice in "
                               f"{case}. {why_not_greedy(have[b].tolist(), want[b].tolist(), i)}")
        message = wrong_length(n, want.shape[1], p["eos"], p["max_len"], str(case))
        if message:
            raise CheckFailure(message)


@visible_check
def check_greedy_decode(greedy_decode) -> None:
    """On a scripted stand-in model: bos first, one greedy choice per step, stops at eos or max_len."""
    GreedyDecode().run_cases(greedy_decode)
    passed("greedy_decode feeds its own words back, stops when every sentence has eos_id, respects max_len.")
