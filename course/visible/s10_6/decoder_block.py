"""``DecoderBlock``: the exercise (inputs, nn.TransformerDecoderLayer with the same weights as the
reference, known mistakes, visible cases) and its visible check.

Wrong variants come from the same PyTorch layer with other arguments (a mask left out, norms
exchanged, ``norm_first`` flipped) or from its own sublayers put together wrongly.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    expect_tensor,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    DROPPING,
    UNSCALED_DROPOUT,
    block_shapes,
    copy_into_torch,
    dropout_scale,
    expect_block_structure,
    expect_no_dropout_in_eval,
    kept_scale,
    recorded,
    torch_grads,
    torch_mask,
    unscaled_scale,
)
from course.checking.exercise import seeded_parameters
from course.checking.forbidden import ATTENTION, MULTIHEAD
from course.checking.modules import load_parameters

HOW = ("Create, in this order, self_attn and cross_attn (two MultiHeadAttention(d_model, num_heads)), ffn (a "
       "FeedForward(d_model, d_ff, activation, dropout)), norm1, norm2 and norm3 (three "
       "nn.LayerNorm(d_model)); "
       "no other parameters.")
ORDER = ("self_attn", "cross_attn", "ffn", "norm1", "norm2", "norm3")  # the contract's creation order
CROSS_FROM_X = Mistake("cross_from_x", "cross-attention whose keys and values come from x instead of memory",
                       "Cross-attention reads the source: its queries come from the decoder's stream, its "
                       "keys and values from the encoder's output, memory.")
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
                      "In pre-norm only the decoder's stream goes through norm2 before the cross-attention; "
                      "the keys and values read memory as the encoder returned it.")
NO_CROSS_RESIDUAL = Mistake("no_cross_residual", "a cross-attention sublayer without its residual connection",
                            "The cross-attention's output is added to the stream it read, like the other two "
                            "sublayers' (in post-norm, inside norm2).")
RELU = Mistake("relu", "ReLU although activation='gelu'", "Pass activation on to FeedForward.")
NORM_RULE = ("With norm_first=True each sublayer is x = x + sublayer(norm(x)); with False, "
             "x = norm(x + sublayer(x)).")
ALWAYS_POST = Mistake("always_post", "post-norm although norm_first=True", NORM_RULE)
ALWAYS_PRE = Mistake("always_pre", "pre-norm although norm_first=False", NORM_RULE)
NO_DROPOUT = Mistake("no_dropout", "sublayer outputs that are never dropped out (no dropout before the "
                                   "residual sums)",
                     "In train() mode each sublayer's output goes through dropout before it is added to "
                     "the residual stream, as in nn.TransformerDecoderLayer: with dropout=1.0 no sublayer "
                     "adds anything, and the block is its LayerNorms alone (post-norm) or the identity "
                     "(pre-norm).")
DROPOUT_AFTER_RESIDUAL = Mistake(
    "dropout_after_residual", "dropout applied after the residual sum instead of to the sublayer's output",
    "Dropout acts on what a sublayer returns, before the residual sum: the residual path itself is never "
    "dropped.")
DROPOUT_ON_INPUT = Mistake(
    "dropout_on_input", "dropout applied to what a sublayer reads instead of to what it returns",
    "Dropout acts on each sublayer's output, just before the residual sum, not on its input.")
FFN_NO_DROPOUT = Mistake(
    "ffn_no_dropout", "a FeedForward built without the block's dropout",
    "FeedForward takes the block's dropout too: nn.TransformerDecoderLayer also drops inside its "
    "feed-forward network, after the activation.")
CREATION_ORDER = Mistake(
    "creation_order", "submodules created in another order than the contract's",
    "The order in which __init__ creates the submodules fixes the random numbers each one starts with "
    "(and the order of model.parameters()): follow the contract's order, " + ", ".join(ORDER) + ".")

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
                 norm_first: bool = False, activation: str = "relu", dropout: float = 0.0,
                 train: bool = False) -> Case:
    """A case: the target mask ("none", "causal", "causal+padding"), source padding or not, the options,
    train() mode or eval(); its kind: pre- or post-norm and the masks, or dropout (in eval() mode, or
    dropout=1.0 in train() mode, which drops every sublayer's output: the one deterministic dropout)."""
    if train and dropout < 1:
        kind = DROPPING
    elif train:
        kind = f"{'pre' if norm_first else 'post'}-norm, dropout=1.0 in train() mode"
    else:
        kind = "dropout in eval() mode" if dropout else \
            f"{'pre' if norm_first else 'post'}-norm, {MASKS[mask, memory_mask]}"
    return Case(name, seed, {"mask": mask, "memory_mask": memory_mask, "norm_first": norm_first,
                             "activation": activation, "dropout": dropout, "train": train}, dtype, kind=kind)


CASES = [
    decoder_case("post-norm, causal mask and source padding", 100, "causal", True, torch.float32),
    decoder_case("pre-norm, causal mask and source padding", 101, "causal", True, norm_first=True),
    decoder_case("pre-norm, gelu, target padding too", 102, "causal+padding", True, norm_first=True,
                 activation="gelu"),
    decoder_case("post-norm, gelu, no masks", 103, "none", False, activation="gelu"),
    decoder_case("post-norm, causal target mask only", 104, "causal", False),
    decoder_case("post-norm, gelu, source padding only", 105, "none", True, activation="gelu"),
    decoder_case("dropout=0.1 in eval() mode", 106, "causal", True, dropout=0.1),
    decoder_case("post-norm, dropout=1.0 in train() mode", 107, "causal", True, dropout=1.0, train=True),
    decoder_case("pre-norm, gelu, dropout=1.0 in train() mode", 108, "causal", True, norm_first=True,
                 activation="gelu", dropout=1.0, train=True),
    decoder_case("post-norm, dropout=0.25 in train() mode", 109, "causal", True, dropout=0.25, train=True),
]
SCALE = "the scale of what each sublayer's dropout keeps"  # 1 / (1 - p): the one deterministic measure
FFN_PROBE = "self.ffn's output in train() mode"  # the output that shows FeedForward's own dropout


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


TRAIN_HINT = ("In train() mode with dropout=1.0 dropout zeroes exactly what the contract drops: each "
              "sublayer's output before its residual sum, and the hidden layer inside FeedForward.")


def expect_creation_order(block: nn.Module) -> None:
    """The submodules that hold parameters come in the contract's order (model.parameters()'s order,
    which is the order __init__ created and assigned them in)."""
    have = [name for name in dict.fromkeys(n.split(".")[0] for n, _ in block.named_parameters())
            if name in ORDER]
    if have != [name for name in ORDER if name in have]:
        raise CheckFailure(f"DecoderBlock's submodules come in the order {', '.join(have)} (the order of "
                           f"model.parameters(), which is the order __init__ assigned them in). "
                           f"{CREATION_ORDER.sentence()}", CREATION_ORDER)


def _blocked(mask, n_q, n_k):
    return torch_mask(mask, DIMS[0], DIMS[4], n_q, n_k)


def torch_layer(case: Case, p: dict, device, *, swap: dict | None = None, **changes) -> nn.Module:
    """nn.TransformerDecoderLayer holding the parameters ``p``, in the case's mode (train() or eval()),
    its attention weights never dropped (our MultiHeadAttention has no dropout); ``changes``: other
    arguments, ``swap`` other norms."""
    B, n_t, n_s, d, h, d_ff = DIMS
    options = {k: case.params[k] for k in ("norm_first", "activation", "dropout")}
    layer = nn.TransformerDecoderLayer(d, h, d_ff, batch_first=True, **{**options, **changes})
    layer.self_attn.dropout = layer.multihead_attn.dropout = 0.0
    return copy_into_torch(layer.to(device, case.dtype), p, swap=swap).train(case.params.get("train", False))


def ffn_input(case: Case, device) -> torch.Tensor:
    """What the feed-forward probe reads: (B, n_tgt, d_model), seeded."""
    B, n_t, n_s, d, h, d_ff = DIMS
    return randn((B, n_t, d), generator(case.seed + 31), case.dtype, device)


def torch_ffn(layer: nn.Module, case: Case, device, inner_dropout: bool = True) -> dict:
    """On a train() case, the layer's feed-forward network (with its own dropout, after the activation,
    or without) on the probe's input; elsewhere nothing."""
    if not case.params.get("train"):
        return {}
    drop = layer.dropout if inner_dropout else nn.Identity()
    with torch.no_grad():
        h = ffn_input(case, device)
        return {FFN_PROBE: layer.linear2(drop(layer.activation(layer.linear1(h))))}


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
    return {**out, **torch_grads(layer, p), **torch_ffn(layer, case, device)} if grads else \
        {**out, **torch_ffn(layer, case, device)}


def rearranged_outputs(case: Case, device, *, cross_from="memory", norm3="norm3", norm_memory=False,
                       cross_residual=True, dropout="output"):
    """The layer's own sublayers put together with one thing changed (see the keywords): ``dropout``
    on each sublayer's "output" (the contract), "none", "after" the residual sum, on the "input", or
    "not in ffn" (FeedForward's own dropout left out)."""
    B, n_t, n_s, d, h, d_ff = DIMS
    x, memory, tgt_mask, memory_mask, p = inputs(case, device)
    layer, norm_first = torch_layer(case, p, device), case.params["norm_first"]

    def drop(y):
        return F.dropout(y, case.params["dropout"], layer.training)

    out_drop = drop if dropout == "output" or dropout == "not in ffn" else (lambda y: y)
    in_drop = drop if dropout == "input" else (lambda y: y)
    sum_drop = drop if dropout == "after" else (lambda y: y)

    def attend_self(y):
        return layer.self_attn(y, y, y, attn_mask=_blocked(tgt_mask, n_t, n_t), need_weights=False)[0]

    def attend_cross(y):
        if cross_from == "x":
            return layer.multihead_attn(y, y, y, need_weights=False)[0]
        source = layer.norm2(memory) if norm_memory else memory
        return layer.multihead_attn(y, source, source, attn_mask=_blocked(memory_mask, n_t, n_s),
                                    need_weights=False)[0]

    def feed(y):
        hidden = layer.activation(layer.linear1(y))
        return layer.linear2(hidden if dropout == "not in ffn" else drop(hidden))

    def residual(y, sublayer, norm, keep=True):
        if norm_first:
            z = out_drop(sublayer(in_drop(norm(y))))
            return sum_drop(y + z if keep else z)
        z = out_drop(sublayer(in_drop(y)))
        return norm(sum_drop(y + z if keep else z))

    def call():
        y = residual(x, attend_self, layer.norm1)
        y = residual(y, attend_cross, layer.norm2, keep=cross_residual)
        return (y + feed(y) if norm3 == "none" else residual(y, feed, layer.norm3),)

    out = with_gradients(call, ("output",), {"x": x, "memory": memory}, case.seed)
    probe = torch_ffn(layer, case, device)
    if probe and dropout == "not in ffn":
        with torch.no_grad():
            probe = {FFN_PROBE: feed(ffn_input(case, device))}
    return {**out, **probe}


def dropping(params) -> bool:
    """A case in train() mode with 0 < dropout < 1: random masks, so only the scale of the kept entries is
    compared."""
    return params["train"] and 0 < params["dropout"] < 1


def sublayer_scale(block: nn.Module, call, x: torch.Tensor, norm_first: bool) -> torch.Tensor:
    """What the residual stream gained from each sublayer over what that sublayer returned, at the entries
    dropout kept (:func:`~course.checking.blocks.kept_scale`): 1 / (1 - p) for nn.Dropout."""
    out, seen = recorded(block, call, ("self_attn", "cross_attn", "ffn", *NORMS), NORMS)
    ins = [seen.get(f"{n} in") for n in NORMS]  # the stream each norm reads
    if norm_first:  # x = x + drop(sublayer(norm(x))): the stream between one norm's input and the next
        before, after = ins, [*ins[1:], out]
    else:  # x = norm(x + drop(sublayer(x))): from the last norm's output (x first) to the next norm's input
        before, after = [x.detach(), seen.get("norm1"), seen.get("norm2")], ins
    subs = [seen.get(n) for n in ("self_attn", "cross_attn", "ffn")]
    return kept_scale((sub, None if start is None or end is None else end.double() - start.double())
                      for sub, start, end in zip(subs, before, after))


def _when(test, run):
    """A mistake that exists only on cases where ``test(params)`` holds (elsewhere it says nothing)."""
    return lambda case, device: run(case, device) if test(case.params) else {}


class DecoderBlockModule(Exercise):
    forbidden = ATTENTION | MULTIHEAD
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
        NO_DROPOUT: _when(lambda p: p["train"], partial(rearranged_outputs, dropout="none")),
        DROPOUT_AFTER_RESIDUAL: _when(lambda p: p["train"], partial(rearranged_outputs, dropout="after")),
        DROPOUT_ON_INPUT: _when(lambda p: p["train"], partial(rearranged_outputs, dropout="input")),
        FFN_NO_DROPOUT: _when(lambda p: p["train"], partial(rearranged_outputs, dropout="not in ffn")),
        UNSCALED_DROPOUT: _when(dropping, lambda case, device: {SCALE: unscaled_scale(device)}),
    }
    visible_cases = CASES

    def run(self, impl, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        options = {k: case.params[k] for k in ("dropout", "activation", "norm_first")}
        block = self.build(impl, case, d, h, d_ff, **options)
        expect_block_structure(self.name, block, ("self_attn", "cross_attn"), NORMS, HOW)
        expect_creation_order(block)
        block.to(device).train(case.params["train"])
        x, memory, tgt_mask, memory_mask, p = inputs(case, device)
        params = load_parameters(block, p, self.name, HOW)
        if dropping(case.params):
            def forward():
                out = self.call(case, block, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
                return expect_tensor(out, "DecoderBlock's output", case)

            with torch.no_grad():
                return {SCALE: sublayer_scale(block, forward, x, case.params["norm_first"]).to(device)}

        def call():
            try:
                out = self.call(case, block, x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)
            except CheckFailure as failure:
                if "must match the size" not in str(failure):
                    raise
                raise CheckFailure(f"{failure} {SHAPE_HINT}") from None
            return (expect_tensor(out, "DecoderBlock's output", case),)

        if options["dropout"] and not case.params["train"]:
            with torch.no_grad():
                expect_no_dropout_in_eval(f"DecoderBlock(..., dropout={options['dropout']})",
                                          lambda: call()[0], str(case))
        out = with_gradients(call, ("output",), {"x": x, "memory": memory, **params}, case.seed)
        if case.params["train"]:  # FeedForward's own dropout: the block's output cannot show it
            with torch.no_grad():
                out[FFN_PROBE] = expect_tensor(self.call(case, block.ffn, ffn_input(case, device)),
                                               FFN_PROBE, case)
        return out

    def reference(self, case, device):
        if dropping(case.params):
            return {SCALE: dropout_scale(case.params["dropout"], device)}
        return torch_outputs(case, device, grads=True)

    def evaluate(self, case, got, device):
        want = (DIMS[0], DIMS[1], DIMS[3])
        if "output" in got and tuple(got["output"].shape) != want:
            raise CheckFailure(
                f"DecoderBlock's output should have the shape of x, {want} = (B, n_tgt, d_model), "
                f"in {case}, but has {tuple(got['output'].shape)}. {SHAPE_HINT}")
        try:
            super().evaluate(case, got, device)
        except CheckFailure as failure:
            if failure.mistake is not None or not case.params["train"]:
                raise
            raise CheckFailure(f"{failure} {TRAIN_HINT}") from None


@visible_check
def check_DecoderBlock(DecoderBlock) -> None:
    """Against nn.TransformerDecoderLayer with the same weights: post- and pre-norm, every mask, gelu,
    dropout off in eval() mode and, at dropout=1.0 in train() mode, where it acts (each sublayer's output
    and FeedForward's hidden layer), at dropout=0.25 that what it keeps is scaled by 1 / (1 - p), gradients of
    the inputs and of every parameter, the order of creation."""
    DecoderBlockModule().run_cases(DecoderBlock)
    passed("DecoderBlock matches nn.TransformerDecoderLayer: post- and pre-norm, both masks, gelu, dropout "
           "(off in eval() mode, and where it acts and how it scales in train() mode), its submodules in the "
           "contract's order.")
