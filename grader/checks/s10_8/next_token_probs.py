"""Hidden check of ``next_token_probs``: against the contract's rule (torch.softmax, pairwise ranks).

The contract's computation lives here, not in the shipped visible check (which holds snapshots of it,
:data:`course.visible.s10_8.next_token_probs.EXPECTED`, made by :func:`snapshot`): nothing a learner
holds computes the answer."""

from __future__ import annotations

import torch

from course.visible.s10_8.next_token_probs import (
    CASES,
    GREEDY_TIES_SPLIT,
    NOT_RENORMALISED,
    ROWS,
    TEMPERATURE_MULTIPLIED,
    TOP_K_TIES_SPLIT,
    TOP_P_BEFORE_TEMPERATURE,
    TOP_P_BEFORE_TOP_K,
    TOP_P_DROPS_CROSSING,
    TOP_P_TIES_SPLIT,
    TOP_P_TIES_SPLIT_ASCENDING,
    case_logits,
    learner_probs,
)
from grader.checks.exercise import Exercise, check_unplaced_tensors, registered
from grader.checks.guarded_calls import Case, call_learner, generator, randn


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
    if kind == "ascending":  # Hugging Face's TopPLogitsWarper: drop the least likely while mass <= 1 - p
        order = probs.sort(dim=-1, stable=True)
        dropped = order.values.cumsum(-1) <= 1 - p  # (..., V) in ascending order
        dropped[..., -1] = False  # the most likely token stays
        return torch.zeros_like(probs).scatter(-1, order.indices, (~dropped).to(probs.dtype)).bool()
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
    TOP_P_TIES_SPLIT: {"p_kind": "sorted"}, TOP_P_TIES_SPLIT_ASCENDING: {"p_kind": "ascending"},
    TEMPERATURE_MULTIPLIED: {"times": True},
    NOT_RENORMALISED: {"renormalise": False}, GREEDY_TIES_SPLIT: {"greedy_split": True},
}


def snapshot() -> dict:
    """The visible cases' expected probabilities (float64, 12 significant digits), and each known
    mistake's where it differs: what the visible check ships instead of this module's code."""
    out = {}
    for name, lead, T, k, p, _dtype in CASES:
        logits = case_logits(lead, torch.float64)
        want = contract_probs(logits, T, k, p)
        entry = {"reference": _rounded(want)}
        for mistake, changes in VARIANTS.items():
            wrong = contract_probs(logits, T, k, p, **changes)
            if not torch.allclose(wrong, want, rtol=1e-6, atol=1e-9):  # NaN differs too
                entry[mistake.name] = _rounded(wrong)
        out[name] = entry
    return out


def _rounded(probs: torch.Tensor):
    return [float(f"{x:.12g}") for x in probs.flatten().tolist()]


SETTINGS = [  # name, logits ("rows": the visible check's tied rows; else a shape of random logits), T, k, p
    ("tied rows, temperature 1", "rows", 1.0, None, None),
    ("tied rows, temperature 0", "rows", 0.0, None, None),
    ("tied rows, top_k=2", "rows", 1.0, 2, None),
    ("tied rows, top_k=5 (ties at the k-th)", "rows", 0.9, 5, None),
    ("tied rows, top_p=0.65 (ties across p)", "rows", 1.7, None, 0.65),
    ("tied rows, top_k=3 then top_p=0.75", "rows", 1.2, 3, 0.75),
    ("random 1-D logits, temperature 0.5", (9,), 0.5, None, None),
    ("random logits (2, 3, V), top_k=1", (2, 3, 7), 1.3, 1, None),
    ("random logits (4, V), top_k larger than V", (4, 6), 1.0, 10, None),
    ("random logits (3, V), top_k equal to V, top_p=0.6", (3, 5), 0.8, 5, 0.6),
    ("random logits (4, V), top_p=0.3", (4, 10), 1.0, None, 0.3),
    ("random logits (2, 2, V), temperature 2, top_k=4, top_p=0.5", (2, 2, 12), 2.0, 4, 0.5),
    ("random logits (3, V), temperature 0", (3, 9), 0.0, 2, 0.9),
]


def _cases() -> list[Case]:
    out = []
    for i, (name, logits, T, k, p) in enumerate(SETTINGS):
        for dtype in (torch.float64, torch.float32):
            label = f"{name}, {'float32' if dtype == torch.float32 else 'float64'}"
            out.append(Case(label, 1000 + i, {"logits": logits, "options": (T, k, p)}, dtype))
    return out


def _logits(case: Case, device):
    spec = case.params["logits"]
    if spec == "rows":
        return torch.tensor(ROWS, dtype=torch.float64).to(device, case.dtype)
    return randn(spec, generator(case.seed), case.dtype, device, 1.5)


def _options(case: Case) -> dict:
    T, k, p = case.params["options"]
    return {"temperature": T, "top_k": k, "top_p": p}


@registered
class NextTokenProbs(Exercise):
    name = "next_token_probs"
    reference_name = "the contract's probabilities"
    mistakes = {m: (lambda case, device, c=c: {"output": contract_probs(_logits(case, device),
                                                                        **_options(case), **c)})
                for m, c in VARIANTS.items()}

    def cases(self):
        return _cases()

    def run(self, impl, case, device):
        def watched(logits, **options):
            return call_learner(self.name, self.forbidden, case, impl, logits, **options)

        return {"output": learner_probs(watched, _logits(case, device), _options(case), str(case))}

    def reference(self, case, device):
        return {"output": contract_probs(_logits(case, device), **_options(case))}

    def extra_checks(self, impl, device):
        logits = _logits(self.cases()[10], torch.device("cpu"))
        check_unplaced_tensors(self.name, lambda: impl(logits, 2.0, 4, 0.5))
        check_unplaced_tensors(self.name, lambda: impl(logits, 0.0))
