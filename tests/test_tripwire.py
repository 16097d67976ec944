"""Is calling the reference caught through every door, and is a correct answer written
from other primitives never caught? (course/checking/forbidden.py,
grader/autograde/worker/cell_findings.py)"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F

from grader.autograde.worker.cell_findings import reference_calls
from grader.checks import EXERCISES, s10_2, s10_3, s10_7
from samples import load_solution_namespace
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.3-multi-head-attention"
NO_CREDIT = r"No credit for"

# ---------------------------------------------------------------- softmax


def _stable(x, dim):
    return x - x.amax(dim=dim, keepdim=True)


SOFTMAX_DOORS = {
    "torch.softmax": lambda x, dim=-1: torch.softmax(x, dim),
    "F.softmax": lambda x, dim=-1: F.softmax(x, dim=dim),
    "Tensor.softmax": lambda x, dim=-1: x.softmax(dim),
    "torch.special.softmax": lambda x, dim=-1: torch.special.softmax(x, dim),
    "nn.Softmax": lambda x, dim=-1: torch.nn.Softmax(dim)(x),
    "log_softmax().exp()": lambda x, dim=-1: torch.log_softmax(x, dim).exp(),
    "torch._softmax": lambda x, dim=-1: torch._softmax(x, dim, False),
    "torch._safe_softmax": lambda x, dim=-1: torch._safe_softmax(x, dim),
    "torch.ops.aten.softmax": lambda x, dim=-1: torch.ops.aten.softmax(x, dim),
    "torch.ops.aten._softmax.default": lambda x, dim=-1: torch.ops.aten._softmax.default(x, dim, False),
    "torch._C._VariableFunctions.softmax": lambda x, dim=-1: torch._C._VariableFunctions.softmax(x, dim),
    "getattr(torch, 'soft' + 'max')": lambda x, dim=-1: getattr(torch, "soft" + "max")(x, dim),
}


def softmax_without_function_modes(x, dim=-1):
    """Switches the Python-level tripwire off; the operator-level one still sees the kernel."""
    with torch._C.DisableTorchFunction():
        return torch.softmax(x, dim)


def masked_softmax_without_function_modes(x, dim=-1):
    """A masked softmax with nothing masked, seen by the operator-level tripwire only."""
    with torch._C.DisableTorchFunction():
        return torch.ops.aten._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool), dim)


def softmax_by_attention(kernel):
    """softmax(x) as the output of one query attending over n keys that carry x, with an
    identity as the values: ``kernel(q, k, v)`` is an attention of 4-D q, k, v."""
    def softmax(x, dim=-1):
        y = x.movedim(dim, -1)  # (..., n)
        n = y.shape[-1]
        rows = y.reshape(-1, 1, n, 1)  # (b, 1, n, 1)
        k = torch.cat([rows, rows.new_zeros(*rows.shape[:3], n - 1)], -1)  # (b, 1, n, n): x, zeros
        q = torch.zeros_like(k[:, :, :1])  # (b, 1, 1, n): picks the first feature
        q[..., 0] = 1
        v = torch.eye(n, dtype=x.dtype, device=x.device).expand_as(k)  # (b, 1, n, n)
        return kernel(q, k, v).reshape(y.shape).movedim(-1, dim)
    return softmax


SOFTMAX_DOORS.update({
    "torch._C.DisableTorchFunction()": softmax_without_function_modes,
    "torch._masked_softmax": lambda x, dim=-1: torch._masked_softmax(x, torch.zeros_like(x, dtype=torch.bool),
                                                                      dim),
    "aten._masked_softmax, function modes off": masked_softmax_without_function_modes,
    "F.scaled_dot_product_attention": softmax_by_attention(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)),
    "aten._scaled_dot_product_flash_attention_for_cpu": softmax_by_attention(
        lambda q, k, v: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, scale=1.0)[0]),
})


@pytest.mark.parametrize("door", SOFTMAX_DOORS)
def test_softmax_doors_earn_no_credit(door):
    """Does calling PyTorch's softmax by any door earn no credit for softmax?"""
    assert_fails(s10_2.check_softmax, SOFTMAX_DOORS[door], NO_CREDIT)


SOFTMAX_RIGHT = {
    "exp / sum": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(_stable(x, dim).exp()),
    "logsumexp": lambda x, dim=-1: (x - x.logsumexp(dim, keepdim=True)).exp(),
    "max().values": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(
        (x - x.max(dim, keepdim=True).values).exp()),
    "sigmoid-free exp2": lambda x, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(
        torch.exp2(_stable(x, dim) / math.log(2))),
    "F.normalize(p=1)": lambda x, dim=-1: F.normalize(_stable(x, dim).exp(), p=1, dim=dim),
}


@pytest.mark.parametrize("variant", SOFTMAX_RIGHT)
def test_correct_softmaxes_keep_full_credit(variant):
    """Is a softmax written from other primitives (logsumexp, exp2 ...) still accepted?"""
    assert_passes(s10_2.check_softmax, SOFTMAX_RIGHT[variant])


# ---------------------------------------------------------------- attention


def _weights(Q, K, mask):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


def _with_weights(output_of):
    def attention(Q, K, V, mask=None):
        return output_of(Q, K, V, mask), _weights(Q, K, mask)
    return attention


ATTENTION_DOORS = {
    "F.scaled_dot_product_attention": lambda Q, K, V, m: F.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "torch._C._nn": lambda Q, K, V, m: torch._C._nn.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "torch.ops.aten": lambda Q, K, V, m: torch.ops.aten.scaled_dot_product_attention(Q, K, V, attn_mask=m),
    "the math kernel": lambda Q, K, V, m: torch.ops.aten._scaled_dot_product_attention_math(
        Q, K, V, attn_mask=m)[0],
}


def sdpa_without_function_modes(Q, K, V, m):
    with torch._C.DisableTorchFunction():
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=m)


ATTENTION_DOORS["torch._C.DisableTorchFunction()"] = sdpa_without_function_modes


@pytest.mark.parametrize("door", ATTENTION_DOORS)
def test_attention_doors_earn_no_credit(door):
    """Does computing the output with PyTorch's attention, by any door, earn no credit?"""
    assert_fails(s10_2.check_scaled_dot_product_attention, _with_weights(ATTENTION_DOORS[door]),
                 NO_CREDIT)


def attention_einsum(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    w = (scores - scores.logsumexp(-1, keepdim=True)).exp()
    return torch.einsum("...qk,...kd->...qd", w, V), w


def attention_baddbmm(Q, K, V, mask=None):
    lead = Q.shape[:-2]
    q, k, v = (t.reshape(-1, *t.shape[-2:]) for t in (Q, K, V))  # (batch, n, d)
    zeros = q.new_zeros(q.shape[0], q.shape[1], k.shape[1])
    scores = torch.baddbmm(zeros, q, k.transpose(1, 2), alpha=1 / math.sqrt(q.shape[-1]))
    scores = scores.reshape(*lead, *scores.shape[-2:])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    out = torch.bmm(w.reshape(-1, *w.shape[-2:]), v)
    return out.reshape(*lead, *out.shape[-2:]), w


def attention_normalize(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])  # (..., n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = F.normalize((scores - scores.amax(-1, keepdim=True)).exp(), p=1, dim=-1)  # rows sum to 1
    return w @ V, w


@pytest.mark.parametrize("impl", [attention_einsum, attention_baddbmm, attention_normalize],
                         ids=lambda f: f.__name__)
def test_correct_attentions_keep_full_credit(impl):
    """Are attentions written with einsum + logsumexp, baddbmm + torch.softmax, or
    F.normalize of the exponentials accepted?"""
    assert_passes(s10_2.check_scaled_dot_product_attention, impl)


def test_multi_head_attention_through_aten_earns_no_credit(solution):
    """Does a MultiHeadAttention whose core calls torch.ops.aten's attention earn no credit?"""
    base = solution["MultiHeadAttention"]

    class MultiHeadAten(base):
        def forward(self, query, key, value, mask=None):
            B, n_q, d = query.shape
            h = self.num_heads

            def split(t):  # (B, n, d) -> (B, h, n, d // h)
                return t.view(B, -1, h, d // h).transpose(1, 2)

            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            out = torch.ops.aten.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            weights = _weights(q, k, mask)
            return self.w_o(out.transpose(1, 2).reshape(B, n_q, d)), weights

    assert_fails(s10_3.check_MultiHeadAttention, MultiHeadAten, NO_CREDIT)


def test_multi_head_attention_from_einsum_keeps_full_credit(solution):
    """Is a MultiHeadAttention written with einsum, baddbmm and F.normalize accepted?"""
    base = solution["MultiHeadAttention"]

    class MultiHeadEinsum(base):
        def forward(self, query, key, value, mask=None):
            B, n_q, d = query.shape
            h = self.num_heads

            def split(t):  # (B, n, d) -> (B * h, n, d // h)
                return t.view(B, -1, h, d // h).transpose(1, 2).reshape(B * h, -1, d // h)

            q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
            zeros = q.new_zeros(B * h, n_q, k.shape[1])
            scores = torch.baddbmm(zeros, q, k.transpose(1, 2), alpha=(d // h) ** -0.5)
            scores = scores.view(B, h, n_q, -1)  # (B, h, n_q, n_k)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            w = F.normalize((scores - scores.amax(-1, keepdim=True)).exp(), p=1, dim=-1)
            out = torch.einsum("bhqk,bhkd->bqhd", w, v.view(B, h, -1, d // h))  # (B, n_q, h, d // h)
            return self.w_o(out.reshape(B, n_q, d)), w

    assert_passes(s10_3.check_MultiHeadAttention, MultiHeadEinsum)


# ---------------------------------------------------------------- RMSNorm


def _mirrored(norm):
    """An RMSNorm from ``norm(y, eps)``, a centring normalisation of the last axis of y: y = [x, -x]
    has mean 0 and the mean square of x as its variance, so its first half is x / rms(x)."""
    class Norm(torch.nn.Module):
        def __init__(self, d_model, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, torch.nn.Parameter(torch.ones(d_model))

        def forward(self, x):
            y = torch.cat([x, -x], -1)  # (..., 2 d)
            return self.weight * norm(y, self.eps)[..., :x.shape[-1]]
    return Norm


def _flat(y):
    return y.reshape(-1, y.shape[-1])  # (rows, 2 d)


NORM_DOORS = {
    "F.rms_norm": _mirrored(lambda y, eps: F.rms_norm(y, y.shape[-1:], eps=eps)),
    "F.layer_norm": _mirrored(lambda y, eps: F.layer_norm(y, y.shape[-1:], eps=eps)),
    "F.group_norm, one group": _mirrored(lambda y, eps: F.group_norm(_flat(y), 1, eps=eps).view_as(y)),
    "F.instance_norm": _mirrored(lambda y, eps: F.instance_norm(_flat(y)[:, None], eps=eps).view_as(y)),
    "F.batch_norm over the transposed rows": _mirrored(
        lambda y, eps: F.batch_norm(_flat(y).T, None, None, training=True, eps=eps).T.reshape(y.shape)),
    "aten.native_layer_norm, function modes off": _mirrored(lambda y, eps: _without_modes(
        lambda: torch.ops.aten.native_layer_norm(y, y.shape[-1:], None, None, eps)[0])),
}


def _without_modes(call):
    with torch._C.DisableTorchFunction():
        return call()


@pytest.mark.parametrize("door", NORM_DOORS)
def test_normalisation_doors_earn_no_credit_in_rms_norm(door):
    """Does an RMSNorm computed by any normalisation of PyTorch's (a LayerNorm or a GroupNorm of one
    group of [x, -x]) earn no credit, on both sides?"""
    from course.visible.s10_7.rms_norm import check_RMSNorm

    assert_fails(s10_7.check_RMSNorm, NORM_DOORS[door], NO_CREDIT)
    assert_fails(check_RMSNorm, NORM_DOORS[door], NO_CREDIT)


def test_the_normalisation_doors_are_right_answers():
    """Are the doors above right RMSNorms (so the test above fails for the tripwire, not a bug)?"""
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    want = F.rms_norm(x, (8,), eps=1e-6)
    for door, Norm in NORM_DOORS.items():
        assert torch.allclose(Norm(8)(x), want), door


# ---------------------------------------------------------------- every kernel, every exercise

#: What an operator's name says it computes (wider than the tripwire's families on purpose:
#: a new kernel these catch and the families miss must be classified here by hand).
KINDS = {
    "softmax": re.compile(r"soft(?:max|min)"),
    "attention": re.compile(r"attention|attn|sdp|scaled_dot|flash|multi_head|mha|transformer"),
    "multi-head attention": re.compile(r"multi_head|mha|transformer"),
    "normalisation": re.compile(r"norm(?!al)"),
}
#: Norms a right RMSNorm may use (x.norm, F.normalize): a length, not a normalisation of x.
VECTOR_NORMS = re.compile(r"linalg_|frobenius|nuclear|renorm|weight_norm|_foreach_norm|norm_except_dim"
                          r"|^native_norm$|^norm$")
#: Each exercise graded against a softmax or an attention: where its solution is, and the
#: kinds of kernel that compute its reference. An attention computes a softmax too (see
#: softmax_by_attention); a block is graded against nn.TransformerEncoderLayer, and the
#: attention core inside it is the learner's choice.
GRADED = {
    "softmax": ("10.2-scaled-dot-product-attention", {"softmax", "attention"}),
    "scaled_dot_product_attention": ("10.2-scaled-dot-product-attention", {"attention"}),
    "MultiHeadAttention": ("10.3-multi-head-attention", {"attention"}),
    "TransformerBlock": ("10.5-transformer-block", {"multi-head attention"}),
    "DecoderBlock": ("10.6-encoder-decoder", {"attention"}),
    "Transformer": ("10.6-encoder-decoder", {"attention"}),
    "RMSNorm": ("10.7-gpt", {"normalisation"}),
    "grouped_query_attention": ("10.8-decoding", {"attention"}),
}


def kinds_of(operator: str) -> set[str]:
    """What ``operator`` (``aten._masked_softmax``) says it computes."""
    return {kind for kind, pattern in KINDS.items() if pattern.search(operator.split(".")[1])}


D = 4  # the width of the kernels' own little inputs
_g = torch.Generator().manual_seed(0)
_X, _Q = torch.randn(1, 2, D, generator=_g), torch.randn(1, 1, 2, D, generator=_g)  # (B, n, d), (B, h, n, d)
_PROJECTIONS = (torch.randn(3 * D, D, generator=_g), torch.zeros(3 * D),  # in_proj weight, bias
                torch.randn(D, D, generator=_g), torch.zeros(D))  # out_proj weight, bias
_FFN = (torch.randn(2 * D, D, generator=_g), torch.zeros(2 * D), torch.randn(D, 2 * D, generator=_g),
        torch.zeros(D))
_NORMS = (torch.ones(D), torch.zeros(D)) * 2  # two LayerNorms: weight, bias

#: The kernels of PyTorch's softmax and attentions that run on the CPU, each called through
#: torch.ops with the function modes off, so that only the operator-level tripwire sees them.
KERNELS = {
    "aten._masked_softmax": lambda: torch.ops.aten._masked_softmax(_X, _X < -math.inf, -1),  # nothing masked
    "aten._scaled_dot_product_flash_attention_for_cpu":
        lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(_Q, _Q, _Q),
    "aten._native_multi_head_attention":
        lambda: torch.ops.aten._native_multi_head_attention(_X, _X, _X, D, 1, *_PROJECTIONS),
    "aten._transformer_encoder_layer_fwd": lambda: torch.ops.aten._transformer_encoder_layer_fwd(
        _X, D, 1, *_PROJECTIONS, False, False, 1e-5, *_NORMS, *_FFN),
}


def _running(kernel, impl):
    """The solution ``impl`` (a function or an nn.Module class) that also runs ``kernel``."""
    def run_kernel():
        with torch._C.DisableTorchFunction():
            kernel()

    if not isinstance(impl, type):
        def with_kernel(*args, **kwargs):
            run_kernel()
            return impl(*args, **kwargs)
        return with_kernel

    class WithKernel(impl):
        def forward(self, *args, **kwargs):
            run_kernel()
            return super().forward(*args, **kwargs)
    return WithKernel


@pytest.mark.parametrize("exercise, kernel", [(e, k) for e, (_, kinds) in GRADED.items()
                                              for k in KERNELS if kinds_of(k) & kinds])
def test_kernels_of_the_reference_earn_no_credit(exercise, kernel):
    """Does the solution earn no credit once it also runs a kernel of the reference, however
    reached, in every exercise graded against a softmax or an attention?"""
    impl = load_solution_namespace(GRADED[exercise][0])[exercise]
    message = assert_fails(EXERCISES[exercise].check, _running(KERNELS[kernel], impl), NO_CREDIT)
    assert f"its operator {kernel} ran" in message


# ---------------------------------------------------------------- every operator this torch has

#: Operators of those kinds that compute no tensor at all, each with the call that shows it.
NO_TENSOR = {
    "aten._fused_sdp_choice": lambda: torch.ops.aten._fused_sdp_choice(_Q, _Q, _Q),  # the backend to use
}


def registered_operators() -> list[str]:
    """The operators of any kind this torch registers, overloads dropped: aten._masked_softmax."""
    names = {name.split(".")[0].replace("::", ".") for name in torch._C._dispatch_get_all_op_names()}
    return sorted(name for name in names if kinds_of(name))


def classify(operator: str, exercise: str) -> str:
    """Why ``operator`` earns no credit in ``exercise`` or cannot compute its reference;
    "UNCLASSIFIED" if neither."""
    if EXERCISES[exercise].forbidden.operator_hit(operator):
        return "forbidden"
    if operator in NO_TENSOR:
        return "computes no tensor"
    if VECTOR_NORMS.search(operator.split(".")[1]):
        return "a vector or matrix norm: a primitive of right answers"
    if not kinds_of(operator) & GRADED[exercise][1]:
        return f"a {' / '.join(sorted(kinds_of(operator)))}: not what {exercise} is graded against"
    return "UNCLASSIFIED"


def test_the_enumeration_finds_the_known_kernels():
    """Does the walk over the registered operators see the kernels we know of (so that the
    test below cannot pass on an empty list)?"""
    known = {"aten._softmax", "aten._masked_softmax", "quantized.softmax", "aten._fused_sdp_choice",
             *KERNELS,
             "aten.native_layer_norm", "aten.native_group_norm", "aten._fused_rms_norm",
             "aten.linalg_vector_norm"}
    assert known <= set(registered_operators())


@pytest.mark.parametrize("exercise", GRADED)
def test_every_operator_of_the_references_kind_is_forbidden_or_harmless(exercise):
    """Is every operator this torch registers whose name says softmax, attention or normalisation
    either forbidden in the exercises graded against it, or unable to compute their reference?"""
    unclassified = [op for op in registered_operators() if classify(op, exercise) == "UNCLASSIFIED"]
    assert not unclassified, f"{exercise}: forbid these or say why they cannot compute its reference"


@pytest.mark.parametrize("operator", NO_TENSOR)
def test_operators_said_to_compute_no_tensor_do_not(operator):
    """Does each operator let through as computing no tensor return something else?"""
    assert not isinstance(NO_TENSOR[operator](), torch.Tensor)


def test_the_families_leave_the_primitives_of_right_answers_alone():
    """Is no primitive of a right answer (logsumexp, einsum, baddbmm, F.normalize's norm,
    exp2, amax) taken for a softmax or attention kernel?"""
    for name in ("aten.logsumexp", "aten.einsum", "aten.baddbmm", "aten.bmm", "aten.exp2", "aten.amax",
                 "aten.linalg_vector_norm", "aten.masked_fill", "aten.div"):
        assert EXERCISES["softmax"].forbidden.operator_hit(name) is None, name


# ---------------------------------------------------------------- the source scan


@pytest.mark.parametrize("source, exercise, words", [
    ("return torch.ops.aten._softmax(x, dim, False)", "softmax", "torch.ops"),
    ("return torch._C._VariableFunctions.softmax(x, dim)", "softmax", "torch._C"),
    ("return x.softmax(dim)", "softmax", "calls softmax"),
    ("f = getattr(torch, 'soft' + 'max')", "softmax", "by name"),
    ("w = x.softmax(dim)  # nn.Transformer-style", "softmax", "calls softmax"),
    ("%time self.core = nn.MultiheadAttention(d, h)", "TransformerBlock", "attention modules"),
    ("from torch.utils._python_dispatch import _disable_current_modes", "softmax", "dispatch"),
    ("out = F.scaled_dot_product_attention(q, k, v)", "MultiHeadAttention",
     "calls scaled_dot_product_attention"),
    ("self.core = nn.MultiheadAttention(d, h)", "TransformerBlock", "attention modules"),
    ("return F.linear(X, W_q.T), X @ W_k, X @ W_v", "qkv_projections", "calls linear"),
])
def test_source_scan_reports_doors(source, exercise, words):
    """Does the scan of a solution cell report calls of the reference and doors around the
    tripwires?"""
    assert any(words in found for found in reference_calls(source, exercise))


@pytest.mark.parametrize("source, exercise", [
    ("weights = torch.softmax(scores, dim=-1)", "scaled_dot_product_attention"),
    ("out, w = scaled_dot_product_attention(q, k, v, mask)", "MultiHeadAttention"),
    ("self.linear1 = nn.Linear(d_model, d_ff)", "FeedForward"),
    ("return x.softmax(-1)", "TransformerBlock"),
    ("loss.backward()  # the same step nn.Transformer's tutorial takes", "train_step"),
    ('print("no torch.ops, no nn.MultiheadAttention here")', "TransformerBlock"),
    ('"""Like x.softmax(dim), from exp and sum."""\nreturn e / e.sum(dim, keepdim=True)', "softmax"),
])
def test_source_scan_leaves_allowed_code_alone(source, exercise):
    """Are allowed calls (torch.softmax after its exercise, the learner's own attention) and
    what comments and strings say quiet?"""
    assert reference_calls(source, exercise) == []


def test_source_scan_finds_nothing_in_the_solutions():
    """Does no instructor solution cell trip the scan (no false flag on a right answer)?"""
    import nbformat

    from tests.settings import ROOT

    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") and not meta.get("grade"):
                assert reference_calls(cell.source, meta["grade_id"]) == [], (path.name, meta["grade_id"])


def test_calling_the_shipped_checking_code_is_calling_the_reference():
    """Does an answer that calls a function of the shipped checking code (the visible check's own
    reference) get no credit, while methods of the stand-ins the checks hand over stay free?"""
    from course.checking.forbidden import watching_shipped_checks
    from course.checking.standins import ScriptedModel
    from course.visible.s10_2.scaled_dot_product_attention import pytorch_weights

    Q = torch.ones(1, 2, 4)
    with watching_shipped_checks() as hits:
        pytorch_weights(Q, Q, None)
        ScriptedModel({10: [1, 2]}).encode(torch.tensor([[10, 5]]))
    assert hits == {"course.visible.s10_2.scaled_dot_product_attention.pytorch_weights"}

    def attention(Q, K, V, mask=None):
        weights = pytorch_weights(Q, K, mask)
        return weights @ V, weights

    assert_fails(s10_2.check_scaled_dot_product_attention, attention,
                 "No credit.*pytorch_weights.*own checking code")
