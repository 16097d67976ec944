"""Visible check of ``next_token_probs(logits, temperature=1.0, top_k=None, top_p=None)``.

The contract read literally: a token is kept by top-k when fewer than k tokens are strictly more
likely, and by top-p when the strictly more likely ones hold less than p of the mass (ties are kept
or dropped together). Either filter may also cut a group of tokens tied at its boundary, in any
order (exactly k tokens, as ``torch.topk``; the smallest mass that reaches p, as Hugging Face's
``TopPLogitsWarper``): :func:`tie_broken` accepts such an answer. This module ships no code that
computes either: :data:`EXPECTED` holds the probabilities of the visible cases, the numbers of tokens
an answer may keep in each row, and each known mistake's probabilities where they differ, as grading's
reference computes them (a test holds the two equal).
"""

from __future__ import annotations

from functools import partial

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    close,
    expect_tensor,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
)

ORDER = "The order is: temperature (0: argmax), softmax, top-k, top-p, each renormalised."
TOP_P_DROPS_CROSSING = Mistake(
    "top_p_drops_crossing", "top-p dropping the token that takes the mass past p",
    "Keep every token whose strictly more likely tokens hold less than top_p: the token that crosses p "
    "is kept (so the most likely token always is).")
TOP_P_AT_MOST = Mistake(
    "top_p_at_most", "top-p keeping a token whose strictly more likely tokens hold exactly p (<= p, not < p)",
    "Keep a token only while the mass strictly ahead of it is less than top_p: with probabilities 1/2, 1/4, "
    "1/4 and top_p=0.5 the first token alone reaches p, and it alone is kept.")
TOP_P_BEFORE_TEMPERATURE = Mistake(
    "filter_before_temperature", "top-k / top-p chosen on the probabilities before the temperature",
    "Divide the logits by the temperature first, then choose the tokens. " + ORDER)
# Top-p before top-k and one renormalisation at the end give the same probabilities: top-k keeps every
# token ahead of a kept one, so the mass ahead of it is the same before and after top-k.
TOP_P_BEFORE_TOP_K = Mistake(
    "top_p_before_top_k", "top-p measured on the probabilities before top-k renormalised them (top-p "
    "applied before top-k, or one renormalisation at the end)",
    "Top-p works on what top-k kept, renormalised to sum to 1. " + ORDER)
TOP_K_ONE_TOO_MANY = Mistake(
    "top_k_one_too_many", "top-k keeping every token at least as likely as the (k+1)-th largest (the sorted "
    "probabilities read at index k instead of k - 1)",
    "The k-th largest probability is at index k - 1 of the probabilities sorted in descending order (or "
    "probs.topk(k).values[..., -1]): keep the tokens at least as likely as it.")
UNSORTED_MASK = Mistake(
    "unsorted_mask", "top-p's keep-mask, computed on the sorted probabilities, applied to the tokens in "
    "their original order (never scattered back)",
    "The mask of the sorted probabilities says which ranks to keep: send it back to the tokens' own "
    "positions (scatter with the sort's indices) before applying it.")
TEMPERATURE_MULTIPLIED = Mistake("temperature_multiplied", "logits multiplied by the temperature",
                                 "Divide the logits by the temperature: below 1 sharpens, above 1 flattens.")
NOT_RENORMALISED = Mistake("not_renormalised", "the kept probabilities not renormalised",
                           "Divide the kept probabilities by their sum, so that they sum to 1.")
ZERO_TEMPERATURE = Mistake("zero_temperature_divided", "temperature 0 divided by (logits / 0 gives inf and "
                           "NaN)", "Treat temperature 0 first, before any division: all the mass on the "
                                   "largest logit.")
ZERO_AS_ONE = Mistake(
    "zero_temperature_ignored", "temperature 0 left out: no division, and no greedy branch either (litgpt's "
    "sample skips the division when the temperature is 0), so the softmax of the logits as they are",
    "Treat temperature 0 first: all the mass on the largest logit (the lowest index among ties), top_k and "
    "top_p ignored.")
GREEDY_TIES_SPLIT = Mistake("greedy_ties_split", "temperature 0 sharing the mass among tied largest logits",
                            "At temperature 0 all the mass goes to one token, the lowest index among ties "
                            "(the one argmax picks).")

ROWS = [[2.0, 1.0, 1.0, 0.5, 3.0, -1.0, 1.0, 0.0],  # three tokens tied at 1.0
        [0.0, 2.5, 2.5, 1.5, -0.5, 0.3, 1.0, -2.0],  # two tokens tied for the largest
        [1.0, -0.5, 0.2, 2.2, 0.2, 0.2, -1.5, 0.9]]  # three tokens tied at 0.2
CASES = [  # name, which rows and how shaped, temperature, top_k, top_p, dtype
    ("temperature 1, no filter, rows (3, V)", (3,), 1.0, None, None, torch.float32),
    ("temperature 0 with ties for the largest, rows (3, V)", (3,), 0.0, 3, 0.9, torch.float32),
    ("temperature 0.7, top_k=3 (ties at the k-th), 1-D logits (V,), float64", (), 0.7, 3, None,
     torch.float64),
    ("temperature 1, top_k=2 (ties right after the k-th), rows (3, V)", (3,), 1.0, 2, None, torch.float32),
    ("temperature 1.7, top_p=0.65 (ties across p), rows (3, V)", (3,), 1.7, None, 0.65, torch.float32),
    ("temperature 1.2, top_k=3 then top_p=0.75, logits (1, 3, V)", (1, 3), 1.2, 3, 0.75, torch.float32),
    ("temperature 0.9, top_k=8 = V keeps every token, rows (3, V)", (3,), 0.9, 8, None, torch.float32),
    ("temperature 1, top_k=11 > V keeps every token, then top_p=0.6, rows (3, V)", (3,), 1.0, 11, 0.6,
     torch.float32),
]
#: Probabilities exact in binary, the mass ahead of a token exactly top_p: (name, probabilities, T, k, p).
EXACT = [("probabilities 1/2, 1/4, 1/4, top_p=0.5: the mass ahead of a token exactly p", (2.0, 1.0, 1.0), 1.0,
          None, 0.5)]
MISTAKES = (TOP_P_DROPS_CROSSING, TOP_P_AT_MOST, TOP_P_BEFORE_TEMPERATURE, TOP_P_BEFORE_TOP_K,
            TOP_K_ONE_TOO_MANY, UNSORTED_MASK, TEMPERATURE_MULTIPLIED, NOT_RENORMALISED, ZERO_AS_ONE,
            GREEDY_TIES_SPLIT)
#: The snapshot's entry for the numbers of tokens an answer may keep, row by row.
KEPT = "kept counts"


def case_logits(lead, dtype=torch.float32, device="cpu") -> torch.Tensor:
    rows = torch.tensor(ROWS, dtype=torch.float64)  # (3, V)
    logits = rows[0] if lead == () else rows.reshape(*lead, rows.shape[-1])
    return logits.to(device, dtype)


def probs_case(name: str, seed: int, logits: tuple, temperature: float, top_k, top_p,
               dtype=torch.float64) -> Case:
    """A case: its logits, ("rows", lead shape) of :data:`ROWS` or ("random", shape), and the options;
    its kind: temperature 0, or the filters (top_k below V or not, top_p), or the temperature alone."""
    V = {"rows": len(ROWS[0]), "log": len(logits[1])}.get(logits[0]) or logits[1][-1]
    parts = ([f"top_k {'>=' if top_k >= V else '<'} V"] if top_k else []) + (["top_p"] if top_p else [])
    kind = "temperature 0" if temperature == 0 else " then ".join(parts) or "temperature alone"
    return Case(name, seed, {"logits": logits, "options": (temperature, top_k, top_p)}, dtype, kind=kind)


def logits_of(case: Case, device) -> torch.Tensor:
    kind, shape = case.params["logits"]
    if kind == "rows":
        return case_logits(shape, case.dtype, device)
    if kind == "log":  # shape: the probabilities (up to a factor) whose logs are the logits
        return torch.tensor(shape, dtype=torch.float64).log().to(device, case.dtype)
    return randn(shape, generator(case.seed), case.dtype, device, 1.5)


def options_of(case: Case) -> dict:
    T, k, p = case.params["options"]
    return {"temperature": T, "top_k": k, "top_p": p}


def learner_probs(call, logits, options, where: str):
    """``call(logits, **options)``'s probabilities, after the checks of their kind."""
    out = expect_tensor(call(logits.clone(), **options), "next_token_probs", where)
    if options["temperature"] == 0 and not bool(torch.isfinite(out).all()):
        raise CheckFailure(f"next_token_probs gives inf or NaN at temperature 0 in {where}.\n"
                           f"{ZERO_TEMPERATURE.sentence()}", ZERO_TEMPERATURE)
    if out.dtype != logits.dtype:
        raise CheckFailure(f"next_token_probs returns {out.dtype} for logits of {logits.dtype} in {where}: "
                           "keep the logits' dtype.")
    return out


def _expected(case: str, kind: str, like: torch.Tensor) -> dict[str, torch.Tensor]:
    """The snapshot ``kind`` ("reference" or a mistake's name) of ``case``, shaped and typed like ``like``."""
    values = torch.tensor(EXPECTED[case][kind], dtype=torch.float64)
    return {"output": values.reshape(like.shape).to(like.device, like.dtype)}


def tie_broken(got: torch.Tensor, want: torch.Tensor, counts: list[list[int]], rtol: float,
               atol: float) -> bool:
    """Does every row of ``got`` keep what a filter that cuts ties keeps: the most likely of the tokens
    ``want`` keeps (none dropped that is strictly more likely than one kept), as many as one of the row's
    ``counts``, their probabilities ``want``'s renormalised?"""
    V = want.shape[-1]
    rows, wanted = got.detach().reshape(-1, V).to(want), want.reshape(-1, V)
    if len(counts) != rows.shape[0]:
        return False
    for row, ref, allowed in zip(rows, wanted, counts):
        kept = row > atol
        dropped = ref[~kept & (ref > 0)]  # what the contract keeps and this row does not
        if int(kept.sum()) not in allowed or bool((kept & (ref == 0)).any()):
            return False
        if dropped.numel() and bool(dropped.max() > ref[kept].min() * (1 + 1e-6)):
            return False
        share = ref * kept
        if not close(row, share / share.sum(), rtol, atol):
            return False
    return True


class NextTokenProbs(Exercise):
    name = "next_token_probs"
    reference_name = "the contract's probabilities"
    mistakes = {m: (lambda case, device, m=m: _expected(case.name, m.name, logits_of(case, device)))
                for m in MISTAKES}  # a mistake not in the snapshot of a case does not differ there
    visible_cases = [*(probs_case(name, i, ("rows", lead), T, k, p, dtype)
                       for i, (name, lead, T, k, p, dtype) in enumerate(CASES)),
                     *(probs_case(name, 20 + i, ("log", values), T, k, p, torch.float32)
                       for i, (name, values, T, k, p) in enumerate(EXACT))]

    def run(self, impl, case, device):
        call = partial(self.call, case, impl)
        return {"output": learner_probs(call, logits_of(case, device), options_of(case), str(case))}

    def reference(self, case, device):
        return _expected(case.name, "reference", logits_of(case, device))

    def kept_counts(self, case) -> list[list[int]] | None:
        """Per row, the numbers of tokens an answer may keep (ties kept together, or cut at a filter's
        boundary); None where no filter applies."""
        return EXPECTED[case.name].get(KEPT)

    def evaluate(self, case, got, device):
        """The contract's probabilities, or a filter's that cuts tied tokens at its boundary in some order."""
        try:
            super().evaluate(case, got, device)
        except CheckFailure:
            counts, want = self.kept_counts(case), self.expected(case, device)["output"]
            if counts is None or "output" not in got or got["output"].shape != want.shape or \
                    not tie_broken(got["output"], want, counts, *tolerance(want.dtype, device)):
                raise


@visible_check
def check_next_token_probs(next_token_probs) -> None:
    """Temperature 0 and T, top-k and top-p with ties (kept together, or cut at the boundary), and their
    order, against the contract."""
    NextTokenProbs().run_cases(next_token_probs)
    passed("next_token_probs applies the temperature, then top-k and top-p (tied tokens at a boundary kept "
           "together or cut, either is accepted), and renormalises; temperature 0 is greedy.")


#: Written by the hidden check's ``snapshot()`` (the case's logits in float64): {case: {"reference":
#: probabilities, KEPT: per row the numbers of tokens an answer may keep (where a filter applies), mistake
#: name: probabilities where that mistake differs}}.
EXPECTED: dict[str, dict[str, list]] = {
    'temperature 1, no filter, rows (3, V)': {
        'reference': [
            0.191198276672, 0.0703379151749, 0.0703379151749, 0.0426621020939, 0.519730801109,
            0.00951920167247, 0.0703379151749, 0.0258758729277, 0.0288544631791, 0.351519323418,
            0.351519323418, 0.12931673226, 0.0175011165877, 0.0389494512601, 0.0784345629296,
            0.00390502694698, 0.145387796238, 0.0324404022583, 0.065326947879, 0.48270448265,
            0.065326947879, 0.065326947879, 0.0119341570542, 0.131552318162
        ],
    },
    'temperature 0 with ties for the largest, rows (3, V)': {
        'reference': [
            0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        ],
        'zero_temperature_ignored': [
            0.207386262834, 0.0762931424779, 0.0762931424779, 0.0, 0.563734309733, 0.0,
            0.0762931424779, 0.0, 0.0, 0.422318798252, 0.422318798252, 0.155362403497, 0.0, 0.0,
            0.0, 0.0, 0.191389232284, 0.0, 0.0, 0.635434628936, 0.0, 0.0, 0.0, 0.17317613878
        ],
        'greedy_ties_split': [
            0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        ],
    },
    'temperature 0.7, top_k=3 (ties at the k-th), 1-D logits (V,), float64': {
        'reference': [
            0.169730673269, 0.0406761317649, 0.0406761317649, 0.0, 0.708240931436, 0.0,
            0.0406761317649, 0.0
        ],
        'kept counts': [[3, 5]],
        'temperature_multiplied': [
            0.222049092082, 0.110266315848, 0.110266315848, 0.0, 0.447151960372, 0.0,
            0.110266315848, 0.0
        ],
        'not_renormalised': [
            0.164468204687, 0.0394149757149, 0.0394149757149, 0.0, 0.686282050471, 0.0,
            0.0394149757149, 0.0
        ],
    },
    'temperature 1, top_k=2 (ties right after the k-th), rows (3, V)': {
        'reference': [
            0.26894142137, 0.0, 0.0, 0.0, 0.73105857863, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.231475216501, 0.0, 0.0, 0.768524783499, 0.0, 0.0, 0.0, 0.0
        ],
        'kept counts': [[2], [2], [2]],
        'top_k_one_too_many': [
            0.207386262834, 0.0762931424779, 0.0762931424779, 0.0, 0.563734309733, 0.0,
            0.0762931424779, 0.0, 0.0, 0.422318798252, 0.422318798252, 0.155362403497, 0.0, 0.0,
            0.0, 0.0, 0.191389232284, 0.0, 0.0, 0.635434628936, 0.0, 0.0, 0.0, 0.17317613878
        ],
        'not_renormalised': [
            0.191198276672, 0.0, 0.0, 0.0, 0.519730801109, 0.0, 0.0, 0.0, 0.0, 0.351519323418,
            0.351519323418, 0.0, 0.0, 0.0, 0.0, 0.0, 0.145387796238, 0.0, 0.0, 0.48270448265, 0.0,
            0.0, 0.0, 0.0
        ],
    },
    'temperature 1.7, top_p=0.65 (ties across p), rows (3, V)': {
        'reference': [
            0.223877581379, 0.124320647712, 0.124320647712, 0.0, 0.403160475485, 0.0,
            0.124320647712, 0.0, 0.0, 0.391342506153, 0.391342506153, 0.217314987693, 0.0, 0.0,
            0.0, 0.0, 0.171162226927, 0.0, 0.10691387106, 0.346711892882, 0.10691387106,
            0.10691387106, 0.0, 0.161384267011
        ],
        'kept counts': [[4, 5], [3], [4, 6]],
        'top_p_drops_crossing': [
            0.297963649074, 0.165461113254, 0.0, 0.0, 0.536575237672, 0.0, 0.0, 0.0, 0.0, 0.5,
            0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.251983972885, 0.0, 0.0, 0.510427106399, 0.0, 0.0, 0.0,
            0.237588920716
        ],
        'top_p_at_most': [
            0.255661596673, 0.141970513964, 0.141970513964, 0.0, 0.460397375399, 0.0, 0.0, 0.0,
            0.0, 0.391342506153, 0.391342506153, 0.217314987693, 0.0, 0.0, 0.0, 0.0,
            0.217715933386, 0.0, 0.135992932832, 0.441012627203, 0.0, 0.0, 0.0, 0.205278506579
        ],
        'filter_before_temperature': [
            0.35703986214, 0.0, 0.0, 0.0, 0.64296013786, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.251983972885, 0.0, 0.0, 0.510427106399, 0.0, 0.0, 0.0, 0.237588920716
        ],
        'unsorted_mask': [
            0.39613046371, 0.219973771038, 0.219973771038, 0.163921994214, 0.0, 0.0, 0.0, 0.0,
            0.103054658226, 0.448472670887, 0.448472670887, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.24605838778, 0.101820953734, 0.153696614123, 0.498424044362, 0.0, 0.0, 0.0, 0.0
        ],
        'temperature_multiplied': [
            0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        ],
        'not_renormalised': [
            0.18656238725, 0.103599282602, 0.103599282602, 0.0, 0.335962986056, 0.0,
            0.103599282602, 0.0, 0.0, 0.269168798664, 0.269168798664, 0.149471149311, 0.0, 0.0,
            0.0, 0.0, 0.154178017956, 0.0, 0.0963049443093, 0.312308114974, 0.0963049443093,
            0.0963049443093, 0.0, 0.145370312503
        ],
    },
    'temperature 1.2, top_k=3 then top_p=0.75, logits (1, 3, V)': {
        'reference': [
            0.217166088176, 0.09437999287, 0.09437999287, 0.0, 0.499693933214, 0.0, 0.09437999287,
            0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.26894142137, 0.0, 0.0, 0.73105857863,
            0.0, 0.0, 0.0, 0.0
        ],
        'kept counts': [[2, 3, 5], [2], [2]],
        'top_p_drops_crossing': [
            0.302940716035, 0.0, 0.0, 0.0, 0.697059283965, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        ],
        'top_p_at_most': [
            0.267696470045, 0.116340406305, 0.0, 0.0, 0.61596312365, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.26894142137, 0.0, 0.0, 0.73105857863, 0.0, 0.0, 0.0, 0.0
        ],
        'filter_before_temperature': [
            0.302940716035, 0.0, 0.0, 0.0, 0.697059283965, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.26894142137, 0.0, 0.0, 0.73105857863, 0.0, 0.0, 0.0, 0.0
        ],
        'top_p_before_top_k': [
            0.217166088176, 0.09437999287, 0.09437999287, 0.0, 0.499693933214, 0.0, 0.09437999287,
            0.0, 0.0, 0.410745393842, 0.410745393842, 0.178509212316, 0.0, 0.0, 0.0, 0.0,
            0.21559501156, 0.0, 0.0, 0.586048002231, 0.0, 0.0, 0.0, 0.198356986208
        ],
        'top_k_one_too_many': [
            0.217166088176, 0.09437999287, 0.09437999287, 0.0, 0.499693933214, 0.0, 0.09437999287,
            0.0, 0.0, 0.410745393842, 0.410745393842, 0.178509212316, 0.0, 0.0, 0.0, 0.0,
            0.21559501156, 0.0, 0.0, 0.586048002231, 0.0, 0.0, 0.0, 0.198356986208
        ],
        'unsorted_mask': [
            0.534989255756, 0.232505372122, 0.232505372122, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        ],
        'temperature_multiplied': [
            0.231475216501, 0.0, 0.0, 0.0, 0.768524783499, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.191545348561, 0.0, 0.0, 0.808454651439, 0.0, 0.0, 0.0, 0.0
        ],
        'not_renormalised': [
            0.193714509859, 0.0841879789466, 0.0841879789466, 0.0, 0.445732416902, 0.0,
            0.0841879789466, 0.0, 0.0, 0.321429722763, 0.321429722763, 0.139692781674, 0.0, 0.0,
            0.0, 0.0, 0.151754351587, 0.0, 0.0, 0.41251109631, 0.0, 0.0, 0.0, 0.139620743574
        ],
    },
    'temperature 0.9, top_k=8 = V keeps every token, rows (3, V)': {
        'reference': [
            0.186628850573, 0.0614369089313, 0.0614369089313, 0.0352496366589, 0.566928389988,
            0.00665779637375, 0.0614369089313, 0.0202245996128, 0.0229481818134, 0.369081131091,
            0.369081131091, 0.121498920287, 0.0131665978151, 0.0320267676719, 0.0697104211308,
            0.00248684909965, 0.139413699953, 0.0263318466225, 0.0573146855159, 0.528889277592,
            0.0573146855159, 0.0573146855159, 0.00866825926416, 0.124752860021
        ],
        'kept counts': [[8], [8], [8]],
        'temperature_multiplied': [
            0.193384069826, 0.0786240954684, 0.0786240954684, 0.0501329366664, 0.475648059792,
            0.0129964755684, 0.0786240954684, 0.031966171742, 0.0352045839346, 0.334011792601,
            0.334011792601, 0.135799060867, 0.0224474337828, 0.0461167534572, 0.0865893041726,
            0.0058192785847, 0.149622047464, 0.038788058583, 0.0728288691446, 0.440588983557,
            0.0728288691446, 0.0728288691446, 0.0157700477801, 0.136744255182
        ],
    },
    'temperature 1, top_k=11 > V keeps every token, then top_p=0.6, rows (3, V)': {
        'reference': [
            0.26894142137, 0.0, 0.0, 0.0, 0.73105857863, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.231475216501, 0.0, 0.0, 0.768524783499, 0.0, 0.0, 0.0, 0.0
        ],
        'kept counts': [[2], [2], [2]],
        'top_p_drops_crossing': [
            0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0
        ],
        'unsorted_mask': [
            0.73105857863, 0.26894142137, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0758581800212,
            0.924141819979, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.817574476194, 0.182425523806, 0.0,
            0.0, 0.0, 0.0, 0.0, 0.0
        ],
        'not_renormalised': [
            0.191198276672, 0.0, 0.0, 0.0, 0.519730801109, 0.0, 0.0, 0.0, 0.0, 0.351519323418,
            0.351519323418, 0.0, 0.0, 0.0, 0.0, 0.0, 0.145387796238, 0.0, 0.0, 0.48270448265, 0.0,
            0.0, 0.0, 0.0
        ],
    },
    'probabilities 1/2, 1/4, 1/4, top_p=0.5: the mass ahead of a token exactly p': {
        'reference': [
            1.0, 0.0, 0.0
        ],
        'kept counts': [[1]],
        'top_p_at_most': [
            0.666666666667, 0.333333333333, 0.0
        ],
        'not_renormalised': [
            0.5, 0.0, 0.0
        ],
    },
}
