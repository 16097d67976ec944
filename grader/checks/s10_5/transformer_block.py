"""Hidden check of ``TransformerBlock``: against nn.TransformerEncoderLayer with the learner's weights.

``self_attn.in_proj_weight`` = cat of w_q, w_k, w_v, ``out_proj`` = w_o, ``linear1``/``linear2``
from the feed-forward network, ``norm1``/``norm2``. PyTorch's layer runs in ``train()`` mode
(dropout is 0): that takes its plain path, not the fused inference "fast path". Masks are converted
to its polarity (True = blocked): a padding mask as ``src_key_padding_mask``, every other mask as a
per-head ``src_mask``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from course.checking import CheckFailure
from course.checking.blocks import ATTENTION, expect_block_structure
from course.visible.s10_5.feed_forward import NO_ACTIVATION, FeedForwardModule, ffn, ffn_shapes
from course.visible.s10_5.transformer_block import (
    HOW,
    MASK_IGNORED,
    MASK_INVERTED,
    NO_RESIDUAL,
    NORM1_TWICE,
    NORM2_TWICE,
    NORM_FIRST_IGNORED,
    NORMS_SWAPPED,
    POST_NORM_INPUT,
    POST_NORM_SUBLAYER,
    PRE_FOR_POST,
    PRE_NORMED_RESIDUAL,
    UNKNOWN,
)
from grader.checks.common import attention_weights, case_mask, reference_merge, reference_split
from grader.checks.core import Case, Outputs, call_learner, expect_tensor, generator, randn
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
from grader.checks.tripwire import MULTIHEAD

CASES = [  # B, n, d_model, h, d_ff
    Case("post-norm, relu, no mask", 820,
         {"dims": (2, 5, 12, 4, 20), "activation": "relu", "norm_first": False, "mask": "none"}),
    Case("post-norm, gelu, padding mask", 821,
         {"dims": (3, 5, 12, 3, 16), "activation": "gelu", "norm_first": False, "mask": "padding"}),
    Case("post-norm, relu, causal mask", 822,
         {"dims": (2, 6, 8, 2, 24), "activation": "relu", "norm_first": False, "mask": "causal"}),
    Case("pre-norm, relu, no mask", 823,
         {"dims": (2, 5, 12, 4, 20), "activation": "relu", "norm_first": True, "mask": "none"}),
    Case("pre-norm, gelu, padding and causal mask", 824,
         {"dims": (2, 6, 12, 3, 16), "activation": "gelu", "norm_first": True, "mask": "padding+causal"}),
    Case("pre-norm, relu, a different mask per head", 825,
         {"dims": (2, 5, 8, 2, 12), "activation": "relu", "norm_first": True, "mask": "random"}),
    Case("float32, post-norm, gelu, causal mask", 826,
         {"dims": (2, 6, 12, 4, 20), "activation": "gelu", "norm_first": False, "mask": "causal"},
         torch.float32),
    Case("float32, pre-norm, relu, padding mask", 827,
         {"dims": (3, 5, 12, 4, 20), "activation": "relu", "norm_first": True, "mask": "padding"},
         torch.float32),
]
NORMS = ("norm1", "norm2")


def block_shapes(d_model: int, d_ff: int) -> dict[str, tuple]:
    """The contract's parameter names and shapes, in creation order."""
    shapes: dict[str, tuple] = {}
    for w in ATTENTION:
        shapes[f"self_attn.{w}.weight"] = (d_model, d_model)
        shapes[f"self_attn.{w}.bias"] = (d_model,)
    shapes.update(ffn_shapes(d_model, d_ff, prefix="ffn."))
    for norm in NORMS:
        shapes[f"{norm}.weight"] = (d_model,)
        shapes[f"{norm}.bias"] = (d_model,)
    return shapes


def block_inputs(case: Case, device: torch.device):
    """x (a leaf), the mask (True = may attend, or None) and the seeded parameters (leaves)."""
    B, n, d_model, h, d_ff = case.params["dims"]
    g = generator(case.seed)
    x = randn((B, n, d_model), g, case.dtype, device).requires_grad_()
    mask = case_mask(case.params["mask"], (B, h), n, n, g)
    params = {k: v.requires_grad_() for k, v in
              seeded_parameters(block_shapes(d_model, d_ff), case, device).items()}
    return x, None if mask is None else mask.to(device), params


def torch_block(case: Case, device: torch.device) -> Outputs:
    """nn.TransformerEncoderLayer with the case's weights; gradients renamed to the contract's."""
    B, n, d_model, h, d_ff = case.params["dims"]
    x, mask, p = block_inputs(case, device)
    layer = torch.nn.TransformerEncoderLayer(
        d_model, h, d_ff, dropout=0.0, activation=case.params["activation"], batch_first=True,
        norm_first=case.params["norm_first"]).to(device, case.dtype)
    layer.train()  # dropout is 0; train mode keeps PyTorch off its fused inference path
    attn = layer.self_attn
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.cat([p[f"self_attn.{w}.weight"] for w in ATTENTION[:3]]))
        attn.in_proj_bias.copy_(torch.cat([p[f"self_attn.{w}.bias"] for w in ATTENTION[:3]]))
        attn.out_proj.weight.copy_(p["self_attn.w_o.weight"])
        attn.out_proj.bias.copy_(p["self_attn.w_o.bias"])
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(p[f"ffn.{name}.weight"])
            getattr(layer, name).bias.copy_(p[f"ffn.{name}.bias"])
        for name in NORMS:
            getattr(layer, name).weight.copy_(p[f"{name}.weight"])
            getattr(layer, name).bias.copy_(p[f"{name}.bias"])
    if mask is None:
        masks = {}
    elif case.params["mask"] == "padding":  # (B, 1, 1, n), True = keep -> (B, n), True = pad
        masks = {"src_key_padding_mask": ~mask.reshape(B, n)}
    else:  # (..., n, n), True = may attend -> (B * h, n, n), True = blocked
        masks = {"src_mask": ~mask.expand(B, h, n, n).reshape(B * h, n, n)}
    leaves = {"x": x, "in_proj_weight": attn.in_proj_weight, "in_proj_bias": attn.in_proj_bias,
              "self_attn.w_o.weight": attn.out_proj.weight, "self_attn.w_o.bias": attn.out_proj.bias,
              **{f"ffn.{name}.{kind}": getattr(getattr(layer, name), kind)
                 for name in ("linear1", "linear2") for kind in ("weight", "bias")},
              **{f"{name}.{kind}": getattr(getattr(layer, name), kind)
                 for name in NORMS for kind in ("weight", "bias")}}
    outputs = forward_backward(lambda: (layer(x, **masks),), ("output",), leaves, case.seed)
    for kind in ("weight", "bias"):
        chunks = outputs.pop(f"grad in_proj_{kind}").chunk(3)
        outputs.update({f"grad self_attn.{w}.{kind}": g for w, g in zip(ATTENTION, chunks)})
    return {"output": outputs.pop("output"), "grad x": outputs.pop("grad x"),
            **{f"grad {k}": outputs[f"grad {k}"] for k in block_shapes(d_model, d_ff)}}


def block_forward(x, p, mask, num_heads, activation, norm_first, *, arrangement=None,
                  norms=NORMS, ffn_variant="ok", mask_variant="ok"):
    """The block from its parameters ``p``, with switches for the known mistakes.

    ``arrangement``: None (as norm_first says), "post", "pre", "post_norm_sublayer"
    (x + LN(Sublayer(x))), "post_norm_input" (LN(x) + Sublayer(x)), "pre_normed_residual"
    (LN(x) + Sublayer(LN(x))), "no_residual" (LN(Sublayer(x)) or Sublayer(LN(x))).
    """
    d_model = x.shape[-1]

    def norm(name):
        return lambda t: F.layer_norm(t, (d_model,), p[f"{name}.weight"], p[f"{name}.bias"])

    def attend(t):
        q, k, v = (reference_split(F.linear(t, p[f"self_attn.{w}.weight"], p[f"self_attn.{w}.bias"]),
                                   num_heads) for w in ATTENTION[:3])
        if mask is not None and mask_variant == "inverted":  # as the given attention would do it
            weights = attention_weights(q, k, ~mask)
        else:
            weights = attention_weights(q, k, None if mask_variant == "ignored" else mask)
        out = reference_merge(weights @ v)
        return F.linear(out, p["self_attn.w_o.weight"], p["self_attn.w_o.bias"])

    def feed(t):
        return ffn(t, p, activation, prefix="ffn.", variant=ffn_variant)

    arrangement = arrangement or ("pre" if norm_first else "post")
    for sublayer, name in ((attend, norms[0]), (feed, norms[1])):
        ln = norm(name)
        if arrangement == "post":
            x = ln(x + sublayer(x))
        elif arrangement == "pre":
            x = x + sublayer(ln(x))
        elif arrangement == "post_norm_sublayer":
            x = x + ln(sublayer(x))
        elif arrangement == "post_norm_input":
            x = ln(x) + sublayer(x)
        elif arrangement == "pre_normed_residual":
            h = ln(x)
            x = h + sublayer(h)
        elif arrangement == "no_residual":
            x = sublayer(ln(x)) if norm_first else ln(sublayer(x))
    return x


def _variant(**switch):
    def run(case: Case, device: torch.device) -> Outputs:
        h = case.params["dims"][3]
        x, mask, p = block_inputs(case, device)

        def call():
            return (block_forward(x, p, mask, h, case.params["activation"], case.params["norm_first"],
                                  **switch),)

        return forward_backward(call, ("output",), {"x": x, **p}, case.seed)
    return run


@registered
class TransformerBlockModule(Exercise):
    name = "TransformerBlock"
    forbidden = MULTIHEAD
    mistakes = {
        NORM_FIRST_IGNORED: _variant(arrangement="post"),
        PRE_FOR_POST: _variant(arrangement="pre"),
        POST_NORM_SUBLAYER: _variant(arrangement="post_norm_sublayer"),
        POST_NORM_INPUT: _variant(arrangement="post_norm_input"),
        PRE_NORMED_RESIDUAL: _variant(arrangement="pre_normed_residual"),
        NO_RESIDUAL: _variant(arrangement="no_residual"),
        NORMS_SWAPPED: _variant(norms=("norm2", "norm1")),
        NORM1_TWICE: _variant(norms=("norm1", "norm1")),
        NORM2_TWICE: _variant(norms=("norm2", "norm2")),
        NO_ACTIVATION: _variant(ffn_variant="no_activation"),
        MASK_INVERTED: _variant(mask_variant="inverted"),
        MASK_IGNORED: _variant(mask_variant="ignored"),
    }

    def cases(self):
        return CASES

    def run(self, impl, case, device):
        _, _, d_model, h, d_ff = case.params["dims"]
        module = build_module(self.name, self.forbidden, case, impl, d_model, h, d_ff,
                              activation=case.params["activation"], norm_first=case.params["norm_first"])
        expect_block_structure(self.name, module, ("self_attn",), NORMS, HOW)
        x, mask, p = block_inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x, mask)
            return (expect_tensor(out, f"{self.name}'s output", case),)

        return forward_backward(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return torch_block(case, device)

    def evaluate(self, case, got, device):
        """NaN outputs first: they come from queries left without a key (an inverted mask)."""
        out = got.get("output")
        if out is not None and not bool(torch.isfinite(out).all()):
            message = (f"{self.name}: the output has inf or NaN entries in {case}. A query that may "
                       "attend to no key gets NaN attention weights.")
            inverted = self.mistakes[MASK_INVERTED](case, device)["output"]
            if inverted.shape == out.shape and torch.equal(~torch.isfinite(inverted), ~torch.isfinite(out)):
                raise CheckFailure(f"{message}\n{MASK_INVERTED.sentence()}", MASK_INVERTED)
            raise CheckFailure(message)
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 2, 16, activation="tanh"), UNKNOWN)
        FeedForwardModule.dropout(self, impl, torch.randn(2, 6, 8, generator=generator(897)), 8, 2, 16,
                                  norm_first=True)

        def on(dev):
            module = impl(8, 2, 16, activation="gelu", norm_first=True).to(dev)
            module(torch.zeros(2, 3, 8, device=dev), torch.ones(2, 1, 1, 3, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)
