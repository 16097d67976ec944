"""Visible check of ``greedy_decode(model, src, bos_id, eos_id, max_len)`` on a scripted stand-in
model, and the explanations both sides give for a wrong token or a wrong length."""

from __future__ import annotations

import torch

from course.checking import CheckFailure, call_learner, passed, visible_check
from course.checking.standins import OFF_SCRIPT, expect_token_ids, scripted_batch

CASES = [  # name, scripts (one per sentence), bos, eos, max_len
    ("one sentence, <eos> after three words", [[1, 7, 8, 9, 2]], 1, 2, 10),
    ("three sentences of different lengths", [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]],
     1, 2, 12),
    ("max_len reached before <eos>", [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], 1, 2, 5),
    ("bos_id=7, eos_id=4", [[7, 5, 9, 5, 4], [7, 4]], 7, 4, 8),
    ("an empty translation", [[1, 2]], 1, 2, 6),
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


@visible_check
def check_greedy_decode(greedy_decode) -> None:
    """On a scripted stand-in model: bos first, one greedy choice per step, stops at eos or max_len."""
    for name, scripts, bos, eos, max_len in CASES:
        case = f"case '{name}'"
        model, src = scripted_batch(scripts)
        with torch.no_grad():
            out = call_learner("greedy_decode", case, greedy_decode, model, src, bos, eos, max_len)
        rows = expect_token_ids(out, "greedy_decode's result", len(scripts), bos, max_len, case)
        want = [s[:max_len] for s in scripts]
        for b, (have, script) in enumerate(zip(rows, want)):
            for i in range(1, min(len(have), len(script))):
                if have[i] != script[i]:
                    raise CheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy "
                                       "choice in "
                                       f"{case}. {why_not_greedy(have, script, i)}")
        message = wrong_length(len(rows[0]), max(len(s) for s in want), eos, max_len, case)
        if message:
            raise CheckFailure(message)
    passed("greedy_decode feeds its own words back, stops when every sentence has eos_id, respects max_len.")
