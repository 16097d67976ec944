"""Every right answer and every planted bug the suite knows, per exercise, for comparing the
visible tests (the test cells' code before the hidden block) with the hidden checks.

The implementations come from the hidden checks' own tests (``tests/test_checks_s10_*.py``)
plus the bugs this module adds: aliased submodules, inputs of other ranks, each option of
each module, each sentence of the 10.6 model's specification. A bug that only grading can
see is marked with why: a call to the reference the exercise is graded against, or a tensor
created on a fixed device (found by running on another device).

``python -m tests.catalogue`` prints the table of what each side catches.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import time

import torch

from bench.samples import load_solution_namespace, run_visible_test
from tests.answers import DEVICE, REFERENCE, Answer, Entry, assignment_of, declared, declared_sections


def outcome(run) -> BaseException | None:
    """None when ``run()`` passes, else what it raised (AssertionError or any error)."""
    try:
        run()
    except Exception as error:  # noqa: BLE001 - a learner-like implementation may raise anything
        return error
    return None


def message(failure: BaseException | None) -> str | None:
    return None if failure is None else f"{type(failure).__name__}: {failure}"


def run_visible(entry: Entry) -> BaseException | None:
    return outcome(lambda: run_visible_test(entry.assignment, entry.exercise, entry.impl))


def run_hidden(entry: Entry) -> BaseException | None:
    module = importlib.import_module(f"grader.checks.s{entry.section.replace('.', '_')}")
    return outcome(lambda: getattr(module, f"check_{entry.exercise}")(entry.impl))


GENERIC = re.compile(r".* differs from .*: (the largest difference is .*|\d+ entries are inf or NaN)\.")


def names_the_mistake(failure: BaseException | None) -> bool:
    """Does a failure name a known mistake, or say more than "X differs from Y in case Z: the
    largest difference is ... at index ..." (what to fix, which property breaks)?"""
    if failure is None:
        return False
    if getattr(failure, "mistake", None) is not None:
        return True
    lines = [line for line in str(failure).strip().splitlines() if line.strip()]
    return not (len(lines) == 1 and GENERIC.fullmatch(lines[0]))


# ---------------------------------------------------------------- helpers for the test modules


def _tests(section: str):
    """The test module of a section, with the notebook's given code as its globals."""
    module = importlib.import_module(f"tests.test_checks_s{section.replace('.', '_')}")
    namespace = load_solution_namespace(assignment_of(section))
    return module, namespace


# ---------------------------------------------------------------- new planted bugs: 10.2


def softmax_dim1(x, dim=-1):
    """The axis fixed to 1."""
    e = (x - x.amax(1, keepdim=True)).exp()
    return e / e.sum(1, keepdim=True)


def softmax_unsqueeze_last(x, dim=-1):
    """keepdim replaced by unsqueeze(-1): right only for the last axis."""
    e = (x - x.max(dim).values.unsqueeze(-1)).exp()
    return e / e.sum(dim).unsqueeze(-1)


def attention_transpose_12(Q, K, V, mask=None):
    """3-D only: K.transpose(1, 2)."""
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_dot_T(Q, K, V, mask=None):
    """2-D only: K.T reverses every axis of a batch (spelled out: .T warns on batches)."""
    scores = Q @ K.permute(*reversed(range(K.dim()))) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_scale_nq(Q, K, V, mask=None):
    """Scaled by sqrt(n_q) (shape[-2]) instead of sqrt(d_k)."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-2])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_square_mask(Q, K, V, mask=None):
    """Assumes n_q == n_k: builds its own (n, n) view of the mask."""
    n = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.expand(*scores.shape[:-2], n, n), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


# ---------------------------------------------------------------- new planted bugs: 10.3


def split_h_dh_swapped(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, d // num_heads, num_heads).transpose(1, 2)


def _mha_bugs(T):
    class Aliased(T.LearnerMHA):
        check_divisible = True

        def __init__(self, d_model, num_heads, bias=True):
            super().__init__(d_model, num_heads, bias)
            self.w_k = self.w_q

    class KeysFromQuery(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, query, value, mask)

    class ValuesFromKey(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, key, mask)

    class MaskIgnored(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, None)

    class OneHead(T.LearnerMHA):
        check_divisible = True

        def __init__(self, d_model, num_heads, bias=True):
            super().__init__(d_model, num_heads, bias)
            self.h = 1

    return {"w_k is w_q (aliased)": Aliased, "keys from the query": KeysFromQuery,
            "values from the key": ValuesFromKey, "mask ignored": MaskIgnored, "num_heads ignored": OneHead,
            "bias ignored (never a bias)": T.variant(force_bias=False)}


# ---------------------------------------------------------------- the catalogue


def build() -> list[Entry]:
    """Every right answer and planted bug, in course order: the declared ones (tests/answers/),
    then those of the sections not yet declared there (listed below until they move)."""
    entries: list[Entry] = []
    for section in declared_sections():
        entries += declared(section, load_solution_namespace(assignment_of(section)))

    def right(section, exercise, label, impl):
        if section not in declared_sections():
            entries.append(Entry(section, exercise, Answer(label, impl, True)))

    def bug(section, exercise, label, impl, only=None):
        if section not in declared_sections():
            entries.append(Entry(section, exercise, Answer(label, impl, False, grading_only=only)))

    T, ns = _tests("10.2")
    right("10.2", "softmax", "solution", ns["softmax"])
    for f in (T.softmax_logsumexp, T.softmax_max_values):
        right("10.2", "softmax", f.__name__, f)
    for f, only in ((T.softmax_naive, None), (T.softmax_last_axis, None), (T.softmax_global, None),
                    (T.softmax_torch, REFERENCE), (T.softmax_method, REFERENCE), (T.softmax_no_keepdim, None),
                    (softmax_dim1, None), (softmax_unsqueeze_last, None)):
        bug("10.2", "softmax", f.__name__, f, only)
    right("10.2", "scaled_dot_product_attention", "solution", ns["scaled_dot_product_attention"])
    for f in (T.attention_einsum, T.attention_minus_1e9):
        right("10.2", "scaled_dot_product_attention", f.__name__, f)
    A = T._attention
    for label, f, only in (
            ("no scaling", A(scale=lambda Q: 1.0), None), ("scale d_k", A(scale=lambda Q: Q.shape[-1]), None),
            ("softmax over queries", A(dim=-2), None), ("mask inverted", A(invert=True), None),
            ("mask after softmax", A(after=True), None), ("masked scores 0", A(fill=0.0), None),
            ("naive softmax", A(softmax=lambda s, dim: T.softmax_naive(s, dim)), None),
            ("calls F.scaled_dot_product_attention", T.attention_calls_reference, REFERENCE),
            ("fixed device", T.attention_fixed_device, DEVICE),
            ("outputs swapped", T.attention_swapped_outputs, None),
            ("scale by d_v", T.attention_scale_dv, None),
            ("K.transpose(1, 2): 3-D only", attention_transpose_12, None),
            ("K.T: 2-D only", attention_dot_T, None), ("scale by sqrt(n_q)", attention_scale_nq, None),
            ("mask assumed square", attention_square_mask, None)):
        bug("10.2", "scaled_dot_product_attention", label, f, only)
    right("10.2", "dot_product_variance", "solution", ns["dot_product_variance"])
    right("10.2", "dot_product_variance", "a 0-d tensor", T.variance_as_tensor)
    for f in (T.variance_no_scaling, T.variance_scaled_by_dk, T.variance_uniform):
        bug("10.2", "dot_product_variance", f.__name__, f)

    T, ns = _tests("10.3")
    right("10.3", "split_heads", "solution", ns["split_heads"])
    right("10.3", "merge_heads", "solution", ns["merge_heads"])
    for f in (T.split_unflatten, T.split_chunks):
        right("10.3", "split_heads", f.__name__, f)
    for f in (T.merge_permute, T.merge_cat):
        right("10.3", "merge_heads", f.__name__, f)
    bug("10.3", "split_heads", "split_no_transpose", T.split_no_transpose)
    bug("10.3", "split_heads", "h and d_h swapped", split_h_dh_swapped)
    for f in (T.merge_no_transpose, T.merge_view, T.merge_heads_last):
        bug("10.3", "merge_heads", f.__name__, f)
    right("10.3", "MultiHeadAttention", "solution", ns["MultiHeadAttention"])
    right("10.3", "MultiHeadAttention", "EinsumMHA", T.EinsumMHA)
    right("10.3", "MultiHeadAttention", "LearnerMHA", T.variant())
    V = T.variant
    for label, cls, only in (
            ("split without transpose", V(split_transpose=False), None),
            ("merge without transpose", V(merge_transpose=False), None), ("no W_O", V(use_w_o=False), None),
            ("scale sqrt(d_model)", V(scale_by_d_model=True), None),
            ("mask inverted", V(invert_mask=True), None),
            ("heads averaged", V(average_heads=True), None), ("bias always", V(force_bias=True), None),
            ("no ValueError", type("NoCheck", (T.LearnerMHA,), {}), None),
            ("calls F.scaled_dot_product_attention", T.CallsReference, REFERENCE),
            *((label, cls, None) for label, cls in _mha_bugs(T).items())):
        bug("10.3", "MultiHeadAttention", label, cls, only)

    return entries


# ---------------------------------------------------------------- the table


def table(entries: list[Entry]) -> tuple[str, dict]:
    """Run every planted bug through both sides; the markdown table and the totals."""
    rows, totals = [], {"planted": 0, "hidden": 0, "visible": 0, "visible of hidden": 0, "named": 0,
                        "grading only": 0, "missed": []}
    exercises = list(dict.fromkeys((e.section, e.exercise) for e in entries))
    header = ("| section | exercise | planted bugs | hidden catch | visible catch | visible names the "
              "mistake | only grading can see (why) |\n|---|---|---:|---:|---:|---:|---|")
    for section, exercise in exercises:
        bugs = [e for e in entries if (e.section, e.exercise) == (section, exercise) and not e.correct]
        counts = {"hidden": 0, "visible": 0, "named": 0}
        only = [f"{e.label} ({e.grading_only})" for e in bugs if e.grading_only]
        for e in bugs:
            if e.grading_only:
                continue
            hidden, visible = run_hidden(e), run_visible(e)
            counts["hidden"] += hidden is not None
            counts["visible"] += visible is not None
            counts["named"] += names_the_mistake(visible)
            totals["visible of hidden"] += hidden is not None and visible is not None
            if hidden is not None and visible is None:
                totals["missed"].append(f"{section} {exercise}: {e.label}")
        considered = len(bugs) - len(only)
        rows.append(f"| {section} | `{exercise}` | {considered} | {counts['hidden']} | {counts['visible']} | "
                    f"{counts['named']} | {'; '.join(only)} |")
        totals["planted"] += considered
        totals["grading only"] += len(only)
        for key in ("hidden", "visible", "named"):
            totals[key] += counts[key]
    rows.append(f"| **all** | | **{totals['planted']}** | **{totals['hidden']}** | **{totals['visible']}** | "
                f"**{totals['named']}** | {totals['grading only']} more |")
    return header + "\n" + "\n".join(rows), totals


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    torch.set_num_threads(1)
    started = time.perf_counter()
    entries = build()
    text, totals = table(entries)
    print(text)
    ratio = totals["visible of hidden"] / max(1, totals["hidden"])
    print(f"\nVisible tests catch {totals['visible of hidden']} of the {totals['hidden']} bugs the hidden "
          f"checks catch ({ratio:.1%}); they name the mistake for {totals['named']} of {totals['visible']}.")
    if totals["missed"]:
        print("Caught only by the hidden checks: " + "; ".join(totals["missed"]))
    right = [e for e in entries if e.correct]
    rejected = [f"{e.section} {e.exercise} {e.label}" for e in right
                if run_visible(e) is not None or run_hidden(e) is not None]
    print(f"{len(right)} right answers: {len(right) - len(rejected)} pass both sides"
          + (f"; rejected: {rejected}" if rejected else "."))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ratio >= 0.95 and not rejected else 1


if __name__ == "__main__":
    sys.exit(main())

