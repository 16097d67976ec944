"""Visible check of ``next_token_probs(logits, temperature=1.0, top_k=None, top_p=None)``.

The reference is the contract read literally, with ``torch.softmax`` and pairwise comparisons:
a token is kept by top-k when fewer than k tokens are strictly more likely, and by top-p when
the strictly more likely ones hold less than p of the mass (ties are kept or dropped together).
"""

from __future__ import annotations

import torch

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    compare_outputs,
    expect_tensor,
    passed,
    visible_check,
)

ORDER = "The order is: temperature (0: argmax), softmax, top-k, top-p, each renormalised."
TOP_P_DROPS_CROSSING = Mistake(
    "top_p_drops_crossing", "top-p dropping the token that takes the mass past p",
    "Keep every token whose strictly more likely tokens hold less than top_p: the token that crosses p "
    "is kept (so the most likely token always is).")
TOP_P_BEFORE_TEMPERATURE = Mistake(
    "filter_before_temperature", "top-k / top-p chosen on the probabilities before the temperature",
    "Divide the logits by the temperature first, then choose the tokens. " + ORDER)
TOP_P_BEFORE_TOP_K = Mistake("top_p_before_top_k", "top-p applied before top-k", ORDER)
TOP_K_TIES_SPLIT = Mistake(
    "top_k_ties_split", "top-k keeping exactly k tokens (torch.topk's indices), splitting tied tokens",
    "Keep every token with fewer than top_k tokens strictly more likely: compare with the k-th largest "
    "probability (probs >= kth), so ties with it stay.")
TOP_P_TIES_SPLIT = Mistake(
    "top_p_ties_split", "top-p deciding token by token in sorted order, splitting tied tokens",
    "Tokens of equal probability have the same tokens strictly ahead of them: keep or drop them together.")
TEMPERATURE_MULTIPLIED = Mistake("temperature_multiplied", "logits multiplied by the temperature",
                                 "Divide the logits by the temperature: below 1 sharpens, above 1 flattens.")
NOT_RENORMALISED = Mistake("not_renormalised", "the kept probabilities not renormalised",
                           "Divide the kept probabilities by their sum, so that they sum to 1.")
ZERO_TEMPERATURE = Mistake("zero_temperature_divided", "temperature 0 divided by (logits / 0 gives inf and "
                           "NaN)", "Treat temperature == 0 first: all the mass on logits.argmax(dim=-1).")
GREEDY_TIES_SPLIT = Mistake("greedy_ties_split", "temperature 0 sharing the mass among tied largest logits",
                            "At temperature 0 all the mass goes to one token, the lowest index among ties: "
                            "logits.argmax(dim=-1).")

ROWS = [[2.0, 1.0, 1.0, 0.5, 3.0, -1.0, 1.0, 0.0],  # three tokens tied at 1.0
        [0.0, 2.5, 2.5, 1.5, -0.5, 0.3, 1.0, -2.0],  # two tokens tied for the largest
        [1.0, -0.5, 0.2, 2.2, 0.2, 0.2, -1.5, 0.9]]  # three tokens tied at 0.2
CASES = [  # name, which rows and how shaped, temperature, top_k, top_p, dtype
    ("temperature 1, no filter, rows (3, V)", (3,), 1.0, None, None, torch.float32),
    ("temperature 0 with ties for the largest, rows (3, V)", (3,), 0.0, 3, 0.5, torch.float32),
    ("temperature 0.7, top_k=3 (ties at the k-th), 1-D logits (V,), float64", (), 0.7, 3, None,
     torch.float64),
    ("temperature 1.7, top_p=0.65 (ties across p), rows (3, V)", (3,), 1.7, None, 0.65, torch.float32),
    ("temperature 1.2, top_k=3 then top_p=0.75, logits (1, 3, V)", (1, 3), 1.2, 3, 0.75, torch.float32),
]


def case_logits(lead, dtype=torch.float32, device="cpu") -> torch.Tensor:
    rows = torch.tensor(ROWS, dtype=torch.float64)  # (3, V)
    logits = rows[0] if lead == () else rows.reshape(*lead, rows.shape[-1])
    return logits.to(device, dtype)


def _renormalised(probs, keep):
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def _strictly_ahead(probs):
    """(count, mass) of the tokens strictly more likely than each token: (..., V) each."""
    ahead = probs[..., None, :] > probs[..., :, None]  # (..., V, V): [i, j] = p_j > p_i
    return ahead.sum(-1), (ahead * probs[..., None, :]).sum(-1)


def _top_k(probs, k, kind="ok"):
    if kind == "topk indices":
        index = probs.topk(min(k, probs.shape[-1]), dim=-1).indices
        return torch.zeros_like(probs).scatter(-1, index, 1.0).bool()
    return _strictly_ahead(probs)[0] < k


def _top_p(probs, p, kind="ok"):
    if kind in ("sorted", "drops crossing"):  # token by token in a stable descending order
        order = probs.sort(dim=-1, descending=True, stable=True)
        through = order.values.cumsum(-1)  # (..., V): the mass of the ranks up to each rank
        kept = through < p if kind == "drops crossing" else through - order.values < p
        return torch.zeros_like(probs).scatter(-1, order.indices, kept.to(probs.dtype)).bool()
    return _strictly_ahead(probs)[1] < p


def contract_probs(logits, temperature=1.0, top_k=None, top_p=None, *, k_kind="ok", p_kind="ok",
                   p_first=False, times=False, renormalise=True, greedy_split=False, filter_at=None):
    """The contract's probabilities; the keywords switch on known mistakes."""
    if temperature == 0:
        if greedy_split:
            return _renormalised(torch.ones_like(logits), logits == logits.amax(-1, keepdim=True))
        return torch.zeros_like(logits).scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    probs = torch.softmax(logits * temperature if times else logits / temperature, dim=-1)  # (..., V)
    chooser = probs if filter_at is None else torch.softmax(logits / filter_at, dim=-1)
    steps = [("p", top_p), ("k", top_k)] if p_first else [("k", top_k), ("p", top_p)]
    for kind, value in steps:
        if value is None:
            continue
        keep = _top_k(chooser, value, k_kind) if kind == "k" else _top_p(chooser, value, p_kind)
        probs = _renormalised(probs, keep) if renormalise else probs * keep
        chooser = probs if filter_at is None else _renormalised(chooser, keep)
    return probs


VARIANTS = {
    TOP_P_DROPS_CROSSING: {"p_kind": "drops crossing"}, TOP_P_BEFORE_TEMPERATURE: {"filter_at": 1.0},
    TOP_P_BEFORE_TOP_K: {"p_first": True}, TOP_K_TIES_SPLIT: {"k_kind": "topk indices"},
    TOP_P_TIES_SPLIT: {"p_kind": "sorted"}, TEMPERATURE_MULTIPLIED: {"times": True},
    NOT_RENORMALISED: {"renormalise": False}, GREEDY_TIES_SPLIT: {"greedy_split": True},
}


def learner_probs(next_token_probs, logits, options, where: str):
    out = expect_tensor(call_learner("next_token_probs", where, next_token_probs, logits.clone(), **options),
                        "next_token_probs", where)
    if options["temperature"] == 0 and not bool(torch.isfinite(out).all()):
        raise CheckFailure(f"next_token_probs gives inf or NaN at temperature 0 in {where}.\n"
                           f"{ZERO_TEMPERATURE.sentence()}", ZERO_TEMPERATURE)
    if out.dtype != logits.dtype:
        raise CheckFailure(f"next_token_probs returns {out.dtype} for logits of {logits.dtype} in {where}: "
                           "keep the logits' dtype.")
    return out


def compare_probs(next_token_probs, logits, temperature, top_k, top_p, where: str, device=None) -> None:
    """The learner's probabilities against the contract's, naming a known mistake."""
    options = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
    got = {"output": learner_probs(next_token_probs, logits, options, where)}
    want = {"output": contract_probs(logits, **options)}
    variants = {m: (lambda c=c: {"output": contract_probs(logits, **options, **c)})
                for m, c in VARIANTS.items()}
    compare_outputs(got, want, "next_token_probs", where, against="the contract's probabilities",
                    variants=variants, device=device)


@visible_check
def check_next_token_probs(next_token_probs) -> None:
    """Temperature 0 and T, top-k and top-p with ties, and their order, against the contract."""
    for case, lead, temperature, top_k, top_p, dtype in CASES:
        compare_probs(next_token_probs, case_logits(lead, dtype), temperature, top_k, top_p, f"case '{case}'")
    passed("next_token_probs applies the temperature, then top-k and top-p with their ties, and "
           "renormalises; temperature 0 is greedy.")
