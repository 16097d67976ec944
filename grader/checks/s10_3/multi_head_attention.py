"""Hidden check of ``MultiHeadAttention``.

Reference: ``nn.MultiheadAttention(batch_first=True)`` with the learner's (seeded) weights
copied in (``in_proj_weight`` = cat of w_q, w_k, w_v; ``out_proj`` = w_o),
``average_attn_weights=False`` and the mask converted to its polarity (True = blocked).
"""

from __future__ import annotations

import math

import torch

from course.visible.s10_3.multi_head_attention import (
    D_MODEL,
    HOW,
    INVERTED,
    MERGE,
    NO_W_O,
    PROJECTIONS,
    SPLIT,
)
from grader.checks.common import case_mask, reference_merge, reference_split
from grader.checks.core import Case, Outputs, call_learner, expect_tuple, generator, randn
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    expect_value_error,
    forward_backward,
    load_parameters,
    registered,
    seeded_parameters,
)
from grader.checks.tripwire import ATTENTION

NAMES = ("output", "weights")
CASES = [  # B, n_q, n_k, d_model, h
    Case("self-attention, B=2, n=3, d_model=12, h=4", 600, {"dims": (2, 3, 3, 12, 4), "mask": "none"}),
    Case("cross-attention, n_q=3, n_k=5", 601, {"dims": (2, 3, 5, 12, 4), "mask": "none"}),
    Case("cross-attention, bias=False", 602, {"dims": (2, 3, 5, 12, 3), "mask": "none", "bias": False}),
    Case("self-attention, causal mask", 603, {"dims": (2, 5, 5, 12, 4), "mask": "causal"}),
    Case("cross-attention, padding mask", 604, {"dims": (3, 3, 5, 8, 2), "mask": "padding"}),
    Case("padding and causal mask", 605, {"dims": (2, 5, 5, 12, 3), "mask": "padding+causal"}),
    Case("one head", 606, {"dims": (2, 3, 5, 6, 1), "mask": "random"}),
    Case("float32, causal mask", 607, {"dims": (2, 5, 5, 12, 4), "mask": "causal"}, dtype=torch.float32),
]


def _parameter_shapes(d_model: int, bias: bool) -> dict[str, tuple]:
    shapes = {f"{w}.weight": (d_model, d_model) for w in PROJECTIONS}
    if bias:
        shapes.update({f"{w}.bias": (d_model,) for w in PROJECTIONS})
    return dict(sorted(shapes.items(), key=lambda kv: (PROJECTIONS.index(kv[0][:3]), kv[0])))


def mha_inputs(case: Case, device: torch.device):
    """query, key, value (leaves), the mask, and the seeded parameters of a case."""
    B, n_q, n_k, d_model, h = case.params["dims"]
    g = generator(case.seed)
    names = ("query", "key", "value")
    x = {n: randn((B, m, d_model), g, case.dtype, device) for n, m in zip(names, (n_q, n_k, n_k))}
    if n_q == n_k:  # self-attention: queries, keys and values come from one sequence
        x["key"], x["value"] = x["query"].clone(), x["query"].clone()
    mask = case_mask(case.params["mask"], (B, 1), n_q, n_k, g)
    params = seeded_parameters(_parameter_shapes(d_model, case.params.get("bias", True)), case, device)
    leaves = {k: v.requires_grad_() for k, v in x.items()}
    return leaves, None if mask is None else mask.to(device), params


def _torch_mha(case, device) -> Outputs:
    """nn.MultiheadAttention with the case's weights, mask converted to True = blocked."""
    B, n_q, n_k, d_model, h = case.params["dims"]
    bias = case.params.get("bias", True)
    x, mask, p = mha_inputs(case, device)
    mha = torch.nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True).to(device, case.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p["w_q.weight"], p["w_k.weight"], p["w_v.weight"]]))
        mha.out_proj.weight.copy_(p["w_o.weight"])
        if bias:
            mha.in_proj_bias.copy_(torch.cat([p["w_q.bias"], p["w_k.bias"], p["w_v.bias"]]))
            mha.out_proj.bias.copy_(p["w_o.bias"])
    blocked = None if mask is None else ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)
    leaves = {**x, "in_proj_weight": mha.in_proj_weight, "w_o.weight": mha.out_proj.weight}

    def call():
        return mha(x["query"], x["key"], x["value"], attn_mask=blocked, need_weights=True,
                   average_attn_weights=False)

    outputs = forward_backward(call, NAMES, leaves, case.seed)
    grad_in = outputs.pop("grad in_proj_weight").chunk(3)
    outputs.update({f"grad {w}.weight": g for w, g in zip(("w_q", "w_k", "w_v"), grad_in)})
    return outputs


def _functional_mha(case, device, *, split="ok", merge="ok", out_proj=True, scale="d_head",
                    invert=False) -> Outputs:
    """Multi-head attention with one deliberate mistake switched on: the diagnosis variants."""
    B, n_q, n_k, d_model, h = case.params["dims"]
    x, mask, p = mha_inputs(case, device)
    leaves = {**x, **{k: v.requires_grad_() for k, v in p.items() if k.endswith("weight")}}

    def linear(t, w):
        return torch.nn.functional.linear(t, p[f"{w}.weight"], p.get(f"{w}.bias"))

    def heads(t):
        if split == "no_transpose":
            return t.reshape(B, h, t.shape[1], d_model // h)
        return reference_split(t, h)

    def call():
        q, k, v = (heads(linear(x[n], w)) for n, w in zip(("query", "key", "value"), PROJECTIONS))
        d = d_model if scale == "d_model" else d_model // h
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, h, n_q, n_k)
        if mask is not None:
            scores = scores.masked_fill(mask if invert else ~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = weights @ v  # (B, h, n_q, d_h)
        out = out.reshape(B, n_q, d_model) if merge == "no_transpose" else reference_merge(out)
        return (linear(out, "w_o") if out_proj else out), weights

    return forward_backward(call, NAMES, leaves, case.seed)


def _switched(**switch):
    return lambda case, device: _functional_mha(case, device, **switch)


@registered
class MultiHeadAttentionModule(Exercise):
    name = "MultiHeadAttention"
    forbidden = ATTENTION
    mistakes = {SPLIT: _switched(split="no_transpose"), MERGE: _switched(merge="no_transpose"),
                NO_W_O: _switched(out_proj=False), D_MODEL: _switched(scale="d_model"),
                INVERTED: _switched(invert=True)}

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        B, n_q, n_k, d_model, h = case.params["dims"]
        bias = case.params.get("bias", True)
        module = build_module(self.name, self.forbidden, case, impl, d_model, h, bias=bias)
        x, mask, p = mha_inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x["query"], x["key"], x["value"],
                               mask=mask)
            return expect_tuple(out, NAMES, f"{self.name}.forward", case)

        leaves = {**x, **{k: v for k, v in params.items() if k.endswith("weight")}}
        return forward_backward(call, NAMES, leaves, case.seed)

    def reference(self, case, device):
        return _torch_mha(case, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(10, 3), "when d_model=10 is not divisible by num_heads=3")

        def on(dev):
            module = impl(8, 2).to(dev)
            x = torch.zeros(2, 3, 8, device=dev)
            module(x, x, x, mask=torch.ones(3, 3, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)
