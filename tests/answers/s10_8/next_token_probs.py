"""next_token_probs: right answers written differently, and planted bugs."""

import torch

from course.visible.s10_8.next_token_probs import (
    GREEDY_TIES_SPLIT,
    NOT_RENORMALISED,
    TEMPERATURE_MULTIPLIED,
    TOP_K_ONE_TOO_MANY,
    TOP_P_AT_MOST,
    TOP_P_BEFORE_TEMPERATURE,
    TOP_P_BEFORE_TOP_K,
    TOP_P_DROPS_CROSSING,
    UNSORTED_MASK,
    ZERO_AS_ONE,
    ZERO_TEMPERATURE,
)
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "next_token_probs"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'comparisons, triangles and sorts a right answer runs too'


def _greedy(logits):
    return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)


def _keep_top_k(probs, k, split_ties=False, clamp=True, one_too_many=False):
    if one_too_many:  # the sorted probabilities read at index k: the (k+1)-th largest
        ordered = probs.sort(dim=-1, descending=True).values
        if k >= probs.shape[-1]:
            return torch.ones_like(probs, dtype=torch.bool)
        return probs >= ordered[..., k:k + 1]
    k = min(k, probs.shape[-1]) if clamp else k  # probs.topk(k) raises for k > V
    if split_ties:
        index = probs.topk(k, dim=-1).indices
        return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, True)
    return probs >= probs.topk(k, dim=-1).values[..., -1:]


def _keep_top_p(probs, p, kind="ok"):
    """kind: "ok" (strictly more likely mass < p), "crossing" (without the shift), "sorted" (rank by rank),
    "hugging face" (transformers' TopPLogitsWarper: ascending sort, drop while the mass is <= 1 - p),
    "unsorted" (rank by rank, the mask never scattered back to the tokens)."""
    if kind == "hugging face":
        ascending, index = probs.sort(dim=-1)
        remove = ascending.cumsum(dim=-1) <= 1 - p
        remove[..., -1:] = False  # min_tokens_to_keep=1
        return ~remove.scatter(-1, index, remove)
    ordered, index = probs.sort(dim=-1, descending=True, stable=True)
    cumulative = ordered.cumsum(-1)
    if kind == "crossing":
        return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, cumulative < p)
    if kind == "sorted":
        return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, cumulative - ordered < p)
    if kind == "unsorted":
        return cumulative - ordered < p
    if kind == "at most":  # rank by rank, a token kept while the mass before it is at most p
        return torch.zeros_like(probs, dtype=torch.bool).scatter(-1, index, cumulative - ordered <= p)
    ahead = (probs[..., None, :] > probs[..., :, None]).to(probs.dtype) @ probs[..., :, None]  # (..., V, 1)
    return ahead[..., 0] < p


def _renorm(probs, keep, renormalise=True):
    kept = probs.masked_fill(~keep, 0.0)
    return kept / kept.sum(-1, keepdim=True) if renormalise else kept


def make(*, k_split=False, k_clamp=True, k_one_more=False, p_kind="ok", p_first=False, times=False,
         renormalise=True, greedy_split=False, choose_at_one=False, no_greedy=False, skip_zero=False):
    def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
        if temperature == 0 and not no_greedy:
            if greedy_split:
                ties = logits == logits.amax(-1, keepdim=True)
                return ties.to(logits.dtype) / ties.sum(-1, keepdim=True)
            return _greedy(logits)
        if skip_zero and temperature == 0:  # litgpt's sample: divide only by a temperature above 0
            temperature = 1.0
        probs = torch.softmax(logits * temperature if times else logits / temperature, dim=-1)
        chooser = torch.softmax(logits, dim=-1) if choose_at_one else probs
        steps = [("p", top_p), ("k", top_k)] if p_first else [("k", top_k), ("p", top_p)]
        for kind, value in steps:
            if value is None:
                continue
            keep = (_keep_top_k(chooser, value, k_split, k_clamp, k_one_more) if kind == "k"
                    else _keep_top_p(chooser, value, p_kind))
            probs = _renorm(probs, keep, renormalise is True)
            chooser = _renorm(chooser, keep) if choose_at_one else probs
        return probs / probs.sum(-1, keepdim=True) if renormalise == "once" else probs
    return next_token_probs


def per_row_loop(logits, temperature=1.0, top_k=None, top_p=None):
    """Row by row in Python, on sorted lists."""
    rows = logits.reshape(-1, logits.shape[-1])
    out = torch.zeros_like(rows)
    for r, row in enumerate(rows):
        if temperature == 0:
            out[r, int(row.argmax())] = 1.0
            continue
        probs = torch.softmax(row / temperature, dim=-1)
        values = probs.tolist()
        keep = [True] * len(values)
        if top_k is not None:
            keep = [sum(w > v for w in values) < top_k for v in values]
            probs = probs * torch.tensor(keep, dtype=probs.dtype, device=probs.device)
            probs = probs / probs.sum()
            values = probs.tolist()
        if top_p is not None:
            keep = [sum(w for w in values if w > v) < top_p for v in values]
            probs = probs * torch.tensor(keep, dtype=probs.dtype, device=probs.device)
            probs = probs / probs.sum()
        out[r] = probs
    return out.reshape(logits.shape)


def always_float32(logits, temperature=1.0, top_k=None, top_p=None):
    return make()(logits.float(), temperature, top_k, top_p)


def answers(solution):
    return [
        right("solution", solution["next_token_probs"]),
        right("pairwise mass, topk threshold", make()),
        right("per_row_loop", per_row_loop),
        right("top-k keeping exactly k (torch.topk's indices)", make(k_split=True)),
        right("top-p cutting ties in sorted order", make(p_kind="sorted")),
        right("top-p as Hugging Face's TopPLogitsWarper", make(p_kind="hugging face")),
        right("torch.topk's k, then Hugging Face's top-p", make(k_split=True, p_kind="hugging face")),
        bug("top-p drops the crossing token", make(p_kind="crossing"), hidden="differs",
            mistake=TOP_P_DROPS_CROSSING),
        bug("top-p keeps a token with exactly p ahead (<= p)", make(p_kind="at most"), mistake=TOP_P_AT_MOST),
        bug("top-p before the temperature", make(choose_at_one=True), mistake=TOP_P_BEFORE_TEMPERATURE),
        bug("top-p before top-k", make(p_first=True), mistake=TOP_P_BEFORE_TOP_K),
        bug("top-k one token too many (sorted values at index k)", make(k_one_more=True), hidden="differs",
            mistake=TOP_K_ONE_TOO_MANY),
        bug("top-p's sorted mask not scattered back", make(p_kind="unsorted"), hidden="differs",
            mistake=UNSORTED_MASK),
        bug("top_k above V raises (probs.topk(top_k))", make(k_clamp=False), hidden="top_k"),
        bug("temperature multiplied", make(times=True), mistake=TEMPERATURE_MULTIPLIED),
        bug("not renormalised", make(renormalise=False), mistake=NOT_RENORMALISED),
        bug("renormalised once, at the end", make(renormalise="once"), mistake=TOP_P_BEFORE_TOP_K),
        bug("greedy shares ties", make(greedy_split=True), mistake=GREEDY_TIES_SPLIT),
        bug("temperature 0 divides by zero", make(no_greedy=True), hidden="inf or NaN at temperature 0",
            mistake=ZERO_TEMPERATURE),
        bug("no temperature-0 branch, no division by 0 (litgpt's)", make(no_greedy=True, skip_zero=True),
            hidden="differs", mistake=ZERO_AS_ONE),
        bug("always float32", always_float32, hidden="keep the logits' dtype"),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["next_token_probs"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
