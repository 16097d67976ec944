"""``MultiHeadAttention(d_model, num_heads, bias=True)``: the exercise (inputs, reference, known
mistakes, visible cases) and its visible check.

Wrong variants: the same PyTorch module with other weights (no W_O: the identity; the scale of
sqrt(d_model): W_Q divided by sqrt(h)), the mask passed the other way round or not at all, or
heads built around ``F.scaled_dot_product_attention`` with one reshape wrong.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    Exercise,
    Mistake,
    expect_linear_layers,
    expect_pair,
    expect_value_error,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.exercise import seeded_parameters
from course.checking.forbidden import ATTENTION
from course.checking.masks import case_mask
from course.checking.modules import load_parameters
from course.visible.s10_3.split_heads import TRANSPOSE_HINT

SPLIT = Mistake("split", "splitting the heads without the transpose", TRANSPOSE_HINT)
MERGE = Mistake("merge", "merging the heads without the transpose",
                "A reshape of (B, h, n, d_h) alone mixes tokens with heads: each token's heads must "
                "sit side by side before they are joined. Look at the merge in forward.")
NO_W_O = Mistake("no_w_o", "a missing output projection W_O",
                 "The merged heads still need the output projection w_o: without it no output "
                 "feature combines the heads.")
D_MODEL = Mistake("d_model", "scaling by sqrt(d_model) instead of sqrt(d_k) of one head",
                  "Each head has d_k = d_model // num_heads features: scale by sqrt(d_k).")
INVERTED = Mistake("inverted", "the mask inverted",
                   "True means *may attend* (nn.MultiheadAttention uses the opposite!).")
NO_MASK = Mistake("no_mask", "the mask not used", "Pass mask on to the attention of the heads.")
VALUES = Mistake("values", "the values projected from key instead of value",
                 "The values are projected from the value argument: in cross-attention keys and "
                 "values are two inputs.")

NAMES = ("output", "weights")
PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")
HOW = ("The contract asks for four separate nn.Linear layers from d_model to d_model features, "
       "created in the order w_q, w_k, w_v, w_o, with a bias exactly when bias=True.")


def dims(B: int, n_q: int, n_k: int, d_model: int, h: int, mask: str = "none", bias: bool = True) -> dict:
    """A case: query (B, n_q, d_model), key and value (B, n_k, d_model) (one sequence when n_q == n_k:
    self-attention), h heads, its kind of mask, and whether the layers have a bias."""
    return {"dims": (B, n_q, n_k, d_model, h), "mask": mask, "bias": bias}


CASES = [  # cross-attention first: keys taken from the query show in the outputs there
    Case("cross-attention, n_q=3, n_k=5, no mask", 61, dims(2, 3, 5, 12, 4), kind="cross-attention"),
    Case("cross-attention, bias=False", 62, dims(2, 3, 5, 12, 3, bias=False), kind="bias=False"),
    Case("self-attention, B=2, n=3, d_model=12, h=4, no mask", 60, dims(2, 3, 3, 12, 4),
         kind="self-attention"),
    Case("self-attention, causal mask", 63, dims(2, 5, 5, 12, 3, "causal"), kind="causal mask"),
    Case("cross-attention, padding mask, float32", 64, dims(2, 3, 5, 12, 4, "padding"), torch.float32,
         kind="padding mask"),
    Case("padding and causal mask", 65, dims(2, 5, 5, 12, 3, "padding+causal"),
         kind="padding and causal mask"),
    Case("one head, a different mask per sentence", 66, dims(2, 3, 5, 6, 1, "random"), kind="one head"),
]


def parameter_shapes(d_model: int, bias: bool) -> dict[str, tuple]:
    """The contract's parameters, layer by layer (w_q, w_k, w_v, w_o)."""
    return {f"{w}.{k}": (d_model, d_model) if k == "weight" else (d_model,)
            for w in PROJECTIONS for k in (("weight", "bias") if bias else ("weight",))}


def inputs(case: Case, device):
    """query, key, value (leaves), the mask, and the seeded parameters of a case."""
    (B, n_q, n_k, d_model, _), g = case.params["dims"], generator(case.seed)
    lengths = {"query": n_q, "key": n_k, "value": n_k}
    x = {name: randn((B, n, d_model), g, case.dtype, device) for name, n in lengths.items()}
    if n_q == n_k:  # self-attention: queries, keys and values come from one sequence
        x["key"], x["value"] = x["query"].clone(), x["query"].clone()
    mask = case_mask(case.params["mask"], (B, 1), n_q, n_k, g)
    params = seeded_parameters(parameter_shapes(d_model, case.params["bias"]), case, device)
    return {k: v.requires_grad_() for k, v in x.items()}, None if mask is None else mask.to(device), params


def torch_outputs(case: Case, device, *, w_o: bool = True, query_scale: float = 1.0, invert: bool = False,
                  use_mask: bool = True, values_from_keys: bool = False):
    """nn.MultiheadAttention with the case's weights (PyTorch's mask: True = blocked), outputs and
    gradients; the keywords switch on a known mistake (no W_O: the identity; W_Q scaled; the mask
    inverted or left out; the keys used as values)."""
    (B, n_q, n_k, d, h), bias = case.params["dims"], case.params["bias"]
    x, mask, p = inputs(case, device)
    layer = nn.MultiheadAttention(d, h, bias=bias, batch_first=True).to(device, case.dtype)
    with torch.no_grad():  # PyTorch keeps W_Q, W_K, W_V stacked in one matrix
        layer.in_proj_weight.copy_(torch.cat([p["w_q.weight"] * query_scale, p["w_k.weight"],
                                              p["w_v.weight"]]))
        layer.out_proj.weight.copy_(p["w_o.weight"] if w_o else torch.eye(d, device=device))
        if bias:
            layer.in_proj_bias.copy_(torch.cat([p["w_q.bias"] * query_scale, p["w_k.bias"], p["w_v.bias"]]))
            layer.out_proj.bias.copy_(p["w_o.bias"] if w_o else torch.zeros(d, device=device))
    blocked = None
    if mask is not None and use_mask:  # one (n_q, n_k) map per sentence and head
        blocked = (mask if invert else ~mask).expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)
    leaves = {**x, "in_proj_weight": layer.in_proj_weight, "w_o.weight": layer.out_proj.weight}

    def call():
        value = x["key"] if values_from_keys else x["value"]
        return layer(x["query"], x["key"], value, attn_mask=blocked, need_weights=True,
                     average_attn_weights=False)

    out = with_gradients(call, NAMES, leaves, case.seed)
    out.update(zip((f"grad {w}.weight" for w in PROJECTIONS[:3]), out.pop("grad in_proj_weight").chunk(3)))
    return out


def heads_outputs(case: Case, device, *, split_transpose: bool = True, merge_transpose: bool = True):
    """Heads built around F.scaled_dot_product_attention with one reshape switched wrong."""
    (B, n_q, n_k, d, h), (x, mask, p) = case.params["dims"], inputs(case, device)

    def linear(t, w):
        return F.linear(t, p[f"{w}.weight"], p.get(f"{w}.bias"))

    def heads(t, w):
        y = linear(t, w)
        if split_transpose:
            return y.unflatten(-1, (h, d // h)).transpose(1, 2)
        return y.reshape(B, h, t.shape[1], d // h)  # the classic silent bug

    def call():
        q, k, v = heads(x["query"], "w_q"), heads(x["key"], "w_k"), heads(x["value"], "w_v")
        identity = torch.eye(n_k, dtype=k.dtype, device=device).expand(B, h, n_k, n_k)
        weights = F.scaled_dot_product_attention(q, k, identity, attn_mask=mask)
        out = weights @ v  # (B, h, n_q, d_h)
        out = out.transpose(1, 2).flatten(2) if merge_transpose else out.reshape(B, n_q, d)
        return linear(out, "w_o"), weights

    return with_gradients(call, NAMES, x, case.seed)


def _switched(outputs, **switch):
    return lambda case, device: outputs(case, device, **switch)


class MultiHeadAttentionModule(Exercise):
    forbidden = ATTENTION
    name = "MultiHeadAttention"
    reference_name = "nn.MultiheadAttention with the same weights"
    mistakes = {SPLIT: _switched(heads_outputs, split_transpose=False),
                MERGE: _switched(heads_outputs, merge_transpose=False),
                NO_W_O: _switched(torch_outputs, w_o=False),
                D_MODEL: lambda case, device: torch_outputs(
                    case, device, query_scale=1 / math.sqrt(case.params["dims"][4])),
                INVERTED: _switched(torch_outputs, invert=True),
                NO_MASK: _switched(torch_outputs, use_mask=False),
                VALUES: _switched(torch_outputs, values_from_keys=True)}
    visible_cases = CASES

    def run(self, impl, case, device):
        (*_, d, h), bias = case.params["dims"], case.params["bias"]
        module = self.build(impl, case, d, h, bias=bias)
        expect_linear_layers(module, self.name, {w: (d, d) for w in PROJECTIONS}, HOW, bias=bias)
        x, mask, p = inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            out = self.call(case, module, x["query"], x["key"], x["value"], mask=mask)
            return expect_pair(out, f"{self.name}.forward", case)

        leaves = {**x, **{k: v for k, v in params.items() if k.endswith("weight")}}
        return with_gradients(call, NAMES, leaves, case.seed)

    def reference(self, case, device):
        return torch_outputs(case, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(10, 3), "when d_model=10 is not divisible by num_heads=3")


@visible_check
def check_MultiHeadAttention(MultiHeadAttention) -> None:
    """Layers, then output, weights and gradients against nn.MultiheadAttention with the same weights."""
    MultiHeadAttentionModule().run_cases(MultiHeadAttention)
    passed("MultiHeadAttention matches nn.MultiheadAttention: self- and cross-attention, masks, with and "
           "without biases.")
