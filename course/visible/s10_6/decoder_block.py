"""Visible check of ``DecoderBlock``: against nn.TransformerDecoderLayer with the same weights."""

from __future__ import annotations

import torch
from torch import nn

from course.checking import (
    Mistake,
    call_learner,
    compare_outputs,
    expect_shape,
    expect_tensor,
    passed,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    copy_into_torch,
    expect_block_structure,
    expect_no_dropout_in_eval,
    seed_parameters,
    torch_mask,
)
from course.checking.outputs import seeded

HOW = ("Create, in this order, self_attn and cross_attn (two MultiHeadAttention(d_model, num_heads)), ffn (a "
       "FeedForward(d_model, d_ff, activation, dropout)), norm1, norm2 and norm3 (three "
       "nn.LayerNorm(d_model)); "
       "no other parameters.")
CROSS_FROM_X = Mistake("cross_from_x", "cross-attention whose keys and values come from x instead of memory",
                       "Cross-attention reads the source: self.cross_attn(x, memory, memory, memory_mask), "
                       "queries from the decoder, keys and values from the encoder's output.")
NO_NORM3 = Mistake("no_norm3", "a missing third LayerNorm around the feed-forward network",
                   "Each of the three sublayers has its own LayerNorm: norm1 with the self-attention, norm2 "
                   "with the cross-attention, norm3 with the feed-forward network.")
NORM2_TWICE = Mistake("norm2_twice", "norm2 used for the feed-forward sublayer too (norm3 unused)",
                      "The feed-forward sublayer uses self.norm3.")
NO_TGT_MASK = Mistake("no_tgt_mask", "self-attention without tgt_mask",
                      "Pass tgt_mask to the self-attention, or every target token sees the future.")
NO_MEMORY_MASK = Mistake("no_memory_mask", "cross-attention without memory_mask",
                         "Pass memory_mask to the cross-attention, or the decoder attends to source padding.")
NORM_MEMORY = Mistake("norm_memory", "pre-norm that also normalises memory with norm2",
                      "In pre-norm only the decoder's stream is normalised: self.cross_attn(self.norm2(x), "
                      "memory, memory, memory_mask).")
NO_CROSS_RESIDUAL = Mistake("no_cross_residual", "a cross-attention sublayer without its residual connection",
                            "Add the cross-attention's output to x: x + cross_attn(...) (post-norm: inside "
                            "norm2).")
RELU = Mistake("relu", "ReLU although activation='gelu'", "Pass activation on to FeedForward.")
NORM_RULE = ("With norm_first=True each sublayer is x = x + sublayer(norm(x)); with False, "
             "x = norm(x + sublayer(x)).")
ALWAYS_POST = Mistake("always_post", "post-norm although norm_first=True", NORM_RULE)
ALWAYS_PRE = Mistake("always_pre", "pre-norm although norm_first=False", NORM_RULE)

DIMS = (2, 4, 5, 12, 3, 10)  # B, n_tgt, n_src, d_model, h, d_ff: every dimension differs
CASES = [  # name, norm_first, activation, target mask, source padding, dropout, dtype
    ("post-norm, causal mask and source padding", False, "relu", "causal", True, 0.0, torch.float32),
    ("pre-norm, causal mask and source padding", True, "relu", "causal", True, 0.0, torch.float64),
    ("pre-norm, gelu, target padding too", True, "gelu", "causal+padding", True, 0.0, torch.float64),
    ("post-norm, gelu, no masks", False, "gelu", None, False, 0.0, torch.float64),
    ("dropout=0.1 in eval() mode", False, "relu", "causal", True, 0.1, torch.float64),
]


def lengths_mask(B: int, n: int) -> torch.Tensor:
    """(B, 1, 1, n): sentence 0 padded by 2, the others by 1."""
    return (torch.arange(n) < torch.tensor([n - 2] + [n - 1] * (B - 1))[:, None])[:, None, None, :]


def _masks(kind, source_padding):
    B, n_t, n_s = DIMS[:3]
    tgt_mask = None
    if kind is not None:
        tgt_mask = torch.ones(n_t, n_t, dtype=torch.bool).tril()
        if kind == "causal+padding":
            tgt_mask = lengths_mask(B, n_t) & tgt_mask  # (B, 1, n_t, n_t)
    return tgt_mask, (lengths_mask(B, n_s) if source_padding else None)


def _blocked(mask, n_q, n_k):
    return torch_mask(mask, DIMS[0], DIMS[4], n_q, n_k)


def _layer(module, spec, **changes):
    """nn.TransformerDecoderLayer with the block's weights; ``changes``: other arguments, ``swap`` norms."""
    case, norm_first, activation, kind, source, dropout, dtype = spec
    B, n_t, n_s, d, h, d_ff = DIMS
    swap = changes.pop("swap", None)
    options = {"norm_first": norm_first, "activation": activation, **changes}
    layer = nn.TransformerDecoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, **options).to(dtype)
    return copy_into_torch(layer, module, swap=swap).eval()


def _through(layer, *, use_tgt_mask=True, use_memory_mask=True):
    n_t, n_s = DIMS[1], DIMS[2]

    def call(x, memory, tgt_mask, memory_mask):
        return layer(x, memory, tgt_mask=_blocked(tgt_mask if use_tgt_mask else None, n_t, n_t),
                     memory_mask=_blocked(memory_mask if use_memory_mask else None, n_t, n_s))
    return call


def _rearranged(layer, norm_first, *, cross_from="memory", norm3="norm3", norm_memory=False,
                cross_residual=True):
    """The layer's sublayers put together with one thing changed (see the keywords)."""
    n_t, n_s = DIMS[1], DIMS[2]

    def call(x, memory, tgt_mask, memory_mask):
        def attend_self(y):
            return layer.self_attn(y, y, y, attn_mask=_blocked(tgt_mask, n_t, n_t), need_weights=False)[0]

        def attend_cross(y):
            if cross_from == "x":
                return layer.multihead_attn(y, y, y, need_weights=False)[0]
            source = layer.norm2(memory) if norm_memory else memory
            return layer.multihead_attn(y, source, source, attn_mask=_blocked(memory_mask, n_t, n_s),
                                        need_weights=False)[0]

        def feed(y):
            return layer.linear2(layer.activation(layer.linear1(y)))

        def residual(y, sublayer, norm, keep=True):
            if norm_first:
                return y + sublayer(norm(y)) if keep else sublayer(norm(y))
            return norm(y + sublayer(y)) if keep else norm(sublayer(y))

        x = residual(x, attend_self, layer.norm1)
        x = residual(x, attend_cross, layer.norm2, keep=cross_residual)
        if norm3 == "none":
            return x + feed(x)
        return residual(x, feed, layer.norm3)
    return call


def _outputs(call, spec, seed):
    dtype = spec[-1]
    B, n_t, n_s, d, h, d_ff = DIMS
    x = seeded(B, n_t, d, seed=seed, dtype=dtype).requires_grad_()
    memory = seeded(B, n_s, d, seed=seed + 1, dtype=dtype).requires_grad_()
    tgt_mask, memory_mask = _masks(spec[3], spec[4])
    return with_gradients(lambda: (call(x, memory, tgt_mask, memory_mask),), ("output",),
                          {"x": x, "memory": memory}, seed)


def _variants(module, spec, seed) -> dict:
    norm_first = spec[1]

    def layer(**options):  # built only when needed, to name a mistake
        mask_use = {k: options.pop(k) for k in ("use_tgt_mask", "use_memory_mask") if k in options}
        return lambda: _outputs(_through(_layer(module, spec, **options), **mask_use), spec, seed)

    def rearranged(**switch):
        return lambda: _outputs(_rearranged(_layer(module, spec), norm_first, **switch), spec, seed)

    return {CROSS_FROM_X: rearranged(cross_from="x"), NO_NORM3: rearranged(norm3="none"),
            NORM2_TWICE: layer(swap={"norm3": "norm2"}), NO_TGT_MASK: layer(use_tgt_mask=False),
            NO_MEMORY_MASK: layer(use_memory_mask=False), NORM_MEMORY: rearranged(norm_memory=True),
            NO_CROSS_RESIDUAL: rearranged(cross_residual=False), RELU: layer(activation="relu"),
            ALWAYS_POST if norm_first else ALWAYS_PRE: layer(norm_first=not norm_first)}


@visible_check
def check_DecoderBlock(DecoderBlock) -> None:
    """Against nn.TransformerDecoderLayer with the same weights: post- and pre-norm, masks, gelu, dropout."""
    B, n_t, n_s, d, h, d_ff = DIMS
    for seed, spec in enumerate(CASES):
        name, norm_first, activation, kind, source, dropout, dtype = spec
        case = f"case '{name}'"
        module = call_learner("DecoderBlock", case, DecoderBlock, d, h, d_ff, dropout=dropout,
                              activation=activation, norm_first=norm_first)
        expect_block_structure("DecoderBlock", module, ("self_attn", "cross_attn"),
                               ("norm1", "norm2", "norm3"), HOW)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype).eval()

        def learner(x, memory, tgt_mask, memory_mask, case=case, module=module):
            out = call_learner("DecoderBlock", case, module, x, memory, tgt_mask=tgt_mask,
                               memory_mask=memory_mask)
            expect_shape(expect_tensor(out, "DecoderBlock's output"), (B, n_t, d),
                         "DecoderBlock's output (the shape of x, (B, n_tgt, d_model))", case)
            return out

        if dropout:
            expect_no_dropout_in_eval(f"DecoderBlock(..., dropout={dropout})",
                                      lambda spec=spec, seed=seed: _outputs(learner, spec, seed)["output"],
                                      case)
        compare_outputs(_outputs(learner, spec, seed), _outputs(_through(_layer(module, spec)), spec, seed),
                        "DecoderBlock", case, against="nn.TransformerDecoderLayer with the same weights",
                        variants=_variants(module, spec, seed))
    passed("DecoderBlock matches nn.TransformerDecoderLayer: post- and pre-norm, both masks, gelu, dropout.")
