"""Visible check of ``TransformerBlock``: against nn.TransformerEncoderLayer with the same weights.

Wrong variants come from the same PyTorch layer with other arguments (``norm_first`` flipped, the
mask inverted or left out, the norms exchanged) or from its own sublayers put together wrongly.
"""

from __future__ import annotations

import torch
from torch import nn

from course.checking import (
    Mistake,
    call_learner,
    check_unplaced_tensors,
    compare_outputs,
    expect_tensor,
    expect_value_error,
    passed,
    seeded,
    visible_check,
    with_gradients,
)
from course.checking.blocks import copy_into_torch, expect_block_structure, seed_parameters, torch_mask
from course.visible.s10_5.dropout import expect_dropout_modes
from course.visible.s10_5.feed_forward import NO_ACTIVATION, UNKNOWN_ACTIVATION

HOW = ("Create, in this order, self_attn (a MultiHeadAttention(d_model, num_heads)), ffn (a "
       "FeedForward(d_model, d_ff, activation, dropout)), norm1 and norm2 (two nn.LayerNorm(d_model)).")
UNKNOWN = f"{UNKNOWN_ACTIVATION}: pass activation on to FeedForward, which raises it"
POST = "Post-norm (norm_first=False) adds first, then normalises the sum: x = norm1(x + attention(x))."
PRE = "Pre-norm (norm_first=True) normalises the sub-layer's input only: x = x + attention(norm1(x))."
NORM_FIRST_IGNORED = Mistake("norm_first_ignored", "post-norm computed although norm_first=True (norm_first "
                             "ignored)", PRE)
PRE_FOR_POST = Mistake("pre_for_post", "pre-norm computed although norm_first=False", POST)
POST_NORM_SUBLAYER = Mistake("post_norm_sublayer", "the norm before the residual add: the sub-layer's output "
                             "normalised, x + LN(Sublayer(x))", POST)
POST_NORM_INPUT = Mistake("post_norm_input", "the norm before the residual add: LN(x) + Sublayer(x)", POST)
PRE_NORMED_RESIDUAL = Mistake("pre_normed_residual", "the pre-norm residual taken from the normalised input: "
                              "LN(x) + Sublayer(LN(x))", "Keep the raw x on the residual path: h = norm1(x); "
                              "x = x + attention(h).")
NO_RESIDUAL = Mistake("no_residual", "a missing residual connection",
                      "Add each sub-layer's input back to its output (x + ...).")
NORMS_SWAPPED = Mistake("norms_swapped", "norm1 and norm2 swapped",
                        "norm1 belongs to the attention sub-layer, norm2 to the feed-forward sub-layer.")
OWN_NORM = "Each sub-layer has its own LayerNorm: norm1 with attention, norm2 with the feed-forward network."
NORM1_TWICE = Mistake("norm1_twice", "one LayerNorm (norm1) used for both sub-layers", OWN_NORM)
NORM2_TWICE = Mistake("norm2_twice", "one LayerNorm (norm2) used for both sub-layers", OWN_NORM)
MASK_INVERTED = Mistake("mask_inverted", "the mask inverted", "True means *may attend*: pass the mask to "
                        "self_attn unchanged (PyTorch's masks use the opposite polarity).")
MASK_IGNORED = Mistake("mask_ignored", "the mask not passed to the attention",
                       "Call self.self_attn(x, x, x, mask).")
RELU = Mistake("relu", "ReLU although activation='gelu'", "Pass activation on to FeedForward.")
CASES = [  # name, B, n, d_model, h, d_ff, activation, norm_first, mask, dtype
    ("post-norm, relu, no mask", 2, 5, 12, 4, 20, "relu", False, None, torch.float32),
    ("post-norm, gelu, padding mask (B, 1, 1, n)", 3, 5, 12, 3, 16, "gelu", False, "padding", torch.float64),
    ("pre-norm, relu, causal mask (n, n)", 2, 6, 8, 2, 24, "relu", True, "causal", torch.float64),
    ("pre-norm, gelu, padding and causal mask", 2, 6, 12, 3, 16, "gelu", True, "padding+causal",
     torch.float32),
    ("post-norm, relu, a different mask per head", 2, 5, 8, 2, 12, "relu", False, "random", torch.float64),
]


def block_mask(kind, B, h, n, seed):
    """True = may attend, as the notebooks pass masks; every query keeps a key and loses one."""
    if kind is None:
        return None
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    keep = (torch.arange(n) < torch.tensor([n - 2] + [n - 1] * (B - 1))[:, None])[:, None, None, :]
    if kind == "causal":
        return causal  # (n, n)
    if kind == "padding":
        return keep  # (B, 1, 1, n)
    if kind == "padding+causal":
        return keep & causal  # (B, 1, n, n)
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(B, h, n, n, generator=g) < 0.5
    mask[..., 0], mask[..., -1] = True, False
    return mask


def _layer(module, spec, **changes):
    """nn.TransformerEncoderLayer with the block's weights; ``changes``: other arguments or norms."""
    case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec
    swap = changes.pop("swap", None)
    linear = changes.pop("linear", False)
    options = {"activation": activation, "norm_first": norm_first, **changes}
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, **options).to(dtype)
    layer.train()  # dropout is 0; train() keeps PyTorch off its fused inference path
    if linear:
        layer.activation = nn.Identity()  # the feed-forward network without its activation
    return copy_into_torch(layer, module, swap=swap)


def _through(layer, spec, *, mask_use: str = "ok"):
    """x -> layer(x) with the case's mask converted (or inverted, or left out)."""
    case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec

    def call(x, mask):
        if mask is None or mask_use == "ignored":
            return layer(x)
        if mask_use == "inverted":
            mask = ~mask
        # Every mask as a per-head src_mask, True = blocked (a src_key_padding_mask would make
        # PyTorch import sympy for its shape check: a second of waiting, once).
        return layer(x, src_mask=torch_mask(mask, B, h, n, n))
    return call


def _arranged(layer, spec, arrangement: str):
    """The layer's own sublayers put together in a wrong arrangement."""
    case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec

    def call(x, mask):
        blocked = None if mask is None else torch_mask(mask, B, h, n, n)

        def attend(t):
            return layer.self_attn(t, t, t, attn_mask=blocked, need_weights=False)[0]

        def feed(t):
            return layer.linear2(layer.activation(layer.linear1(t)))

        for sublayer, norm in ((attend, layer.norm1), (feed, layer.norm2)):
            if arrangement == "post_norm_sublayer":
                x = x + norm(sublayer(x))
            elif arrangement == "post_norm_input":
                x = norm(x) + sublayer(x)
            elif arrangement == "pre_normed_residual":
                x = norm(x) + sublayer(norm(x))
            else:  # no residual
                x = sublayer(norm(x)) if norm_first else norm(sublayer(x))
        return x
    return call


def _outputs(call, spec, seed):
    case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    mask = block_mask(kind, B, h, n, seed)
    return with_gradients(lambda: (call(x, mask),), ("output",), {"x": x}, seed)


def _variants(module, spec, seed) -> dict:
    norm_first, activation = spec[7], spec[6]

    def layer(mask_use="ok", **changes):  # built only when needed, to name a mistake
        return lambda: _outputs(_through(_layer(module, spec, **changes), spec, mask_use=mask_use), spec,
                                seed)

    def arranged(arrangement):
        return lambda: _outputs(_arranged(_layer(module, spec), spec, arrangement), spec, seed)

    variants = {
        NORM_FIRST_IGNORED if norm_first else PRE_FOR_POST: layer(norm_first=not norm_first),
        NORMS_SWAPPED: layer(swap={"norm1": "norm2", "norm2": "norm1"}),
        NORM1_TWICE: layer(swap={"norm2": "norm1"}),
        NORM2_TWICE: layer(swap={"norm1": "norm2"}),
        MASK_INVERTED: layer(mask_use="inverted"),
        MASK_IGNORED: layer(mask_use="ignored"),
        NO_ACTIVATION: layer(linear=True),
        NO_RESIDUAL: arranged("none"),
        POST_NORM_SUBLAYER: arranged("post_norm_sublayer"),
        POST_NORM_INPUT: arranged("post_norm_input"),
        PRE_NORMED_RESIDUAL: arranged("pre_normed_residual"),
    }
    if activation == "gelu":
        variants[RELU] = layer(activation="relu")
    return variants


@visible_check
def check_TransformerBlock(TransformerBlock) -> None:
    """Against nn.TransformerEncoderLayer with the same weights: post- and pre-norm, relu and gelu,
    no mask, padding, causal, both, and one mask per head; the ValueError and dropout."""
    expect_value_error("TransformerBlock", lambda: TransformerBlock(8, 2, 16, activation="tanh"), UNKNOWN)
    for seed, spec in enumerate(CASES):
        case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec
        where = f"case '{case}'"
        module = call_learner("TransformerBlock", where, TransformerBlock, d, h, d_ff, activation=activation,
                              norm_first=norm_first)
        expect_block_structure("TransformerBlock", module, ("self_attn",), ("norm1", "norm2"), HOW)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype)

        def learner(x, mask, where=where, module=module):
            return expect_tensor(call_learner("TransformerBlock", where, module, x, mask),
                                 "TransformerBlock's output")

        compare_outputs(_outputs(learner, spec, seed),
                        _outputs(_through(_layer(module, spec), spec), spec, seed),
                        "TransformerBlock", where, against="nn.TransformerEncoderLayer with the same weights",
                        variants=_variants(module, spec, seed))
    expect_dropout_modes("TransformerBlock", lambda p: TransformerBlock(8, 2, 16, dropout=p, norm_first=True),
                         seeded(2, 6, 8, seed=897),
                         lambda where, fn, *args: call_learner("TransformerBlock", where, fn, *args))
    probe = call_learner("TransformerBlock", "TransformerBlock(8, 2, 16)", TransformerBlock, 8, 2, 16,
                         norm_first=True)
    x, mask = torch.ones(2, 3, 8), torch.ones(2, 1, 1, 3, dtype=torch.bool)
    check_unplaced_tensors("TransformerBlock", lambda: probe(x, mask))
    passed("TransformerBlock matches nn.TransformerEncoderLayer: post- and pre-norm, every kind of mask.")
