"""``DecoderBlock``: the exercise (inputs, nn.TransformerDecoderLayer with the same weights as the
reference, known mistakes, visible cases) and its visible check.

Wrong variants come from the same PyTorch layer with other arguments (a mask left out, norms
exchanged, ``norm_first`` flipped) or from its own sublayers put together wrongly.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    check_unplaced_tensors,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    block_shapes,
    copy_into_torch,
    expect_block_structure,
    expect_no_dropout_in_eval,
    torch_grads,
    torch_mask,
)
from course.checking.exercise import seeded_parameters
from course.checking.modules import load_parameters

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

SHAPE_HINT = ("Check the shapes: x is (B, n_tgt, d_model) and memory (B, n_src, d_model); the "
              "queries of both attentions come from x, the cross-attention's keys and values "
              "from memory, and the output has the shape of x.")
NORMS = ("norm1", "norm2", "norm3")
DIMS = (2, 4, 5, 12, 3, 10)  # B, n_tgt, n_src, d_model, h, d_ff: every dimension differs
MASKS = {("none", False): "no masks", ("causal", False): "causal mask",
         ("causal", True): "causal mask and source padding",
         ("causal+padding", True): "target and source padding",
         ("none", True): "source padding only"}


def decoder_case(name: str, seed: int, mask: str, memory_mask: bool, dtype=torch.float64, *,
                 norm_first: bool = False, activation: str = "relu", dropout: float = 0.0) -> Case:
    """A case: the target mask ("none", "causal", "causal+padding"), source padding or not, the options;
    its kind: pre- or post-norm and the masks, or dropout."""
    kind = "dropout in eval() mode" if dropout else \
        f"{'pre' if norm_first else 'post'}-norm, {MASKS[mask, memory_mask]}"
    return Case(name, seed, {"mask": mask, "memory_mask": memory_mask, "norm_first": norm_first,
                             "activation": activation, "dropout": dropout}, dtype, kind=kind)


CASES = [
    decoder_case("post-norm, causal mask and source padding", 100, "causal", True, torch.float32),
    decoder_case("pre-norm, causal mask and source padding", 101, "causal", True, norm_first=True),
    decoder_case("pre-norm, gelu, target padding too", 102, "causal+padding", True, norm_first=True,
                 activation="gelu"),
    decoder_case("post-norm, gelu, no masks", 103, "none", False, activation="gelu"),
    decoder_case("post-norm, causal target mask only", 104, "causal", False),
    decoder_case("post-norm, gelu, source padding only", 105, "none", True, activation="gelu"),
    decoder_case("dropout=0.1 in eval() mode", 106, "causal", True, dropout=0.1),
]


def lengths_mask(B: int, n: int, g: torch.Generator, device) -> torch.Tensor:
    """(B, 1, 1, n): the first row is padded by 2, the others by 0 to 2; never fully padded."""
    lengths = torch.randint(n - 2, n + 1, (B,), generator=g)
    lengths[0] = n - 2
    return (torch.arange(n) < lengths[:, None])[:, None, None, :].to(device)


def inputs(case: Case, device):
    """x, memory (leaves), tgt_mask, memory_mask (True = may attend, or None) and the seeded parameters."""
    B, n_t, n_s, d, h, d_ff = DIMS
    g = generator(case.seed)
    x = randn((B, n_t, d), g, case.dtype, device).requires_grad_()
    memory = randn((B, n_s, d), g, case.dtype, device).requires_grad_()
    kind, tgt_mask = case.params["mask"], None
    if kind != "none":
        tgt_mask = torch.ones(n_t, n_t, dtype=torch.bool, device=device).tril()
        if kind == "causal+padding":
            tgt_mask = lengths_mask(B, n_t, g, device) & tgt_mask  # (B, 1, n_t, n_t)
    memory_mask = lengths_mask(B, n_s, g, device) if case.params["memory_mask"] else None
    params = seeded_parameters(block_shapes(d, d_ff, decoder=True), case, device)
    return x, memory, tgt_mask, memory_mask, params


def _blocked(mask, n_q, n_k):
    return torch_mask(mask, DIMS[0], DIMS[4], n_q, n_k)


def torch_layer(case: Case, p: dict, device, *, swap: dict | None = None, **changes) -> nn.Module:
    """nn.TransformerDecoderLayer holding the parameters ``p``; ``changes``: other arguments, ``swap``
    other norms."""
    B, n_t, n_s, d, h, d_ff = DIMS
    options = {k: case.params[k] for k in ("norm_first", "activation", "dropout")}
    layer = nn.TransformerDecoderLayer(d, h, d_ff, batch_first=True, **{**options, **changes})
    return copy_into_torch(layer.to(device, case.dtype), p, swap=swap).eval()


def torch_outputs(case: Case, device, *, use_tgt_mask=True, use_memory_mask=True, grads=False, **changes):
    """PyTorch's layer with the case's weights: the output and the gradients of x and memory (and of
    every parameter when ``grads``); the keywords switch on a known mistake."""
    B, n_t, n_s, d, h, d_ff = DIMS
    x, memory, tgt_mask, memory_mask, p = inputs(case, device)
    layer = torch_layer(case, p, device, **changes)

    def call():
        return (layer(x, memory, tgt_mask=_blocked(tgt_mask if use_tgt_mask else None, n_t, n_t),
                      memory_mask=_blocked(memory_mask if use_memory_mask else None, n_t, n_s)),)

    out = with_gradients(call, ("output",), {"x": x, "memory": memory}, case.seed)
    return {**out, **torch_grads(layer, p)} if grads else out


def rearranged_outputs(case: Case, device, *, cross_from="memory", norm3="norm3", norm_memory=False,
                       cross_residual=True):
    """The layer's own sublayers put together with one thing changed (see the keywords)."""
    B, n_t, n_s, d, h, d_ff = DIMS
    x, memory, tgt_mask, memory_mask, p = inputs(case, device)
    layer, norm_first = torch_layer(case, p, device), case.params["norm_first"]

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

    def call():
        y = residual(x, attend_self, layer.norm1)
        y = residual(y, attend_cross, layer.norm2, keep=cross_residual)
        return (y + feed(y) if norm3 == "none" else residual(y, feed, layer.norm3),)

    return with_gradients(call, ("output",), {"x": x, "memory": memory}, case.seed)


def _when(test, run):
    """A mistake that exists only on cases where ``test(params)`` holds (elsewhere it says nothing)."""
    return lambda case, device: run(case, device) if test(case.params) else {}


class DecoderBlockModule(Exercise):
    name = "DecoderBlock"
    reference_name = "nn.TransformerDecoderLayer with the same weights"
    mistakes = {
        CROSS_FROM_X: partial(rearranged_outputs, cross_from="x"),
        NO_NORM3: partial(rearranged_outputs, norm3="none"),
        NORM2_TWICE: partial(torch_outputs, swap={"norm3": "norm2"}),
        NO_TGT_MASK: partial(torch_outputs, use_tgt_mask=False),
        NO_MEMORY_MASK: partial(torch_outputs, use_memory_mask=False),
        NORM_MEMORY: _when(lambda p: p["norm_first"], partial(rearranged_outputs, norm_memory=True)),
        NO_CROSS_RESIDUAL: partial(rearranged_outputs, cross_residual=False),
        RELU: _when(lambda p: p["activation"] == "gelu", partial(torch_outputs, activation="relu")),
        ALWAYS_POST: _when(lambda p: p["norm_first"], partial(torch_outputs, norm_first=False)),
        ALWAYS_PRE: _when(lambda p: not p["norm_first"], partial(torch_outputs, norm_first=True)),
    }
    visible_cases = CASES

    def run(self, impl, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        options = {k: case.params[k] for k in ("dropout", "activation", "norm_first")}
        block = self.build(impl, case, d, h, d_ff, **options)
        expect_block_structure(self.name, block, ("self_attn", "cross_attn"), NORMS, HOW)
        block.to(device).eval()
        x, memory, tgt_mask, memory_mask, p = inputs(case, device)
        params = load_parameters(block, p, self.name, HOW)

        def call():
            try:
                out = self.call(case, block, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            except CheckFailure as failure:
                if "must match the size" not in str(failure):
                    raise
                raise CheckFailure(f"{failure} {SHAPE_HINT}") from None
            return (expect_tensor(out, "DecoderBlock's output", case),)

        if options["dropout"]:
            with torch.no_grad():
                expect_no_dropout_in_eval(f"DecoderBlock(..., dropout={options['dropout']})",
                                          lambda: call()[0], str(case))
        return with_gradients(call, ("output",), {"x": x, "memory": memory, **params}, case.seed)

    def reference(self, case, device):
        return torch_outputs(case, device, grads=True)

    def evaluate(self, case, got, device):
        want = (DIMS[0], DIMS[1], DIMS[3])
        if tuple(got["output"].shape) != want:
            raise CheckFailure(
                f"DecoderBlock's output should have the shape of x, {want} = (B, n_tgt, d_model), "
                f"in {case}, but has {tuple(got['output'].shape)}. {SHAPE_HINT}")
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        probe = self.call("DecoderBlock(8, 2, 6)", impl, 8, 2, 6)
        x, memory = torch.ones(2, 3, 8), torch.ones(2, 5, 8)  # made outside the probe
        masks = {"tgt_mask": torch.ones(3, 3, dtype=torch.bool).tril(),
                 "memory_mask": torch.ones(2, 1, 1, 5, dtype=torch.bool)}
        check_unplaced_tensors(self.name, lambda: probe(x, memory, **masks))


@visible_check
def check_DecoderBlock(DecoderBlock) -> None:
    """Against nn.TransformerDecoderLayer with the same weights: post- and pre-norm, every mask, gelu,
    dropout, gradients of the inputs and of every parameter."""
    DecoderBlockModule().run_cases(DecoderBlock)
    passed("DecoderBlock matches nn.TransformerDecoderLayer: post- and pre-norm, both masks, gelu, dropout.")
