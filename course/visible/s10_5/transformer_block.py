"""``TransformerBlock``: the exercise (inputs, nn.TransformerEncoderLayer with the same weights as
the reference, known mistakes, visible cases) and its visible check.

Wrong variants come from the same PyTorch layer with other arguments (``norm_first`` flipped, the
mask inverted or left out, the norms exchanged) or from its own sublayers put together wrongly.
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
    expect_tensor,
    expect_value_error,
    generator,
    passed,
    randn,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    ATTENTION,
    DROPPING,
    UNSCALED_DROPOUT,
    dropout_scale,
    expect_block_structure,
    kept_scale,
    recorded,
    torch_mask,
    unscaled_scale,
)
from course.checking.exercise import seeded_parameters
from course.checking.forbidden import MULTIHEAD
from course.checking.masks import case_mask
from course.checking.modules import load_parameters
from course.visible.s10_5.feed_forward import NO_ACTIVATION, UNKNOWN_ACTIVATION, FeedForwardModule, ffn_shapes

HOW = ("Create, in this order, self_attn (multi-head attention of width d_model with num_heads heads), "
       "ffn (your FeedForward with the block's d_ff, activation and dropout), then norm1 and norm2 (two "
       "LayerNorms over d_model).")
UNKNOWN = f"{UNKNOWN_ACTIVATION}: pass activation on to FeedForward, which raises it"
POST = ("Post-norm (norm_first=False) adds first, then normalises the sum: x <- LN(x + Sublayer(x)), and "
        "the normalised sum is the next sub-layer's input.")
PRE = ("Pre-norm (norm_first=True) normalises the sub-layer's input only: x <- x + Sublayer(LN(x)); "
       "nothing normalises the sum.")
NORM_FIRST_IGNORED = Mistake("norm_first_ignored", "post-norm computed although norm_first=True (norm_first "
                             "ignored)", PRE)
PRE_FOR_POST = Mistake("pre_for_post", "pre-norm computed although norm_first=False", POST)
POST_NORM_SUBLAYER = Mistake("post_norm_sublayer", "the norm before the residual add: the sub-layer's output "
                             "normalised, x + LN(Sublayer(x))", POST)
POST_NORM_INPUT = Mistake("post_norm_input", "the norm before the residual add: LN(x) + Sublayer(x)", POST)
PRE_NORMED_RESIDUAL = Mistake("pre_normed_residual", "the pre-norm residual taken from the normalised input: "
                              "LN(x) + Sublayer(LN(x))", "The residual path carries the x that came in, "
                              "unnormalised; only the sub-layer sees the normalised tensor.")
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
                       "Pass the mask on to the self-attention: it is the only place where it acts.")
RELU = Mistake("relu", "ReLU although activation='gelu'", "Pass activation on to FeedForward.")
NORMS = ("norm1", "norm2")


def dims(B: int, n: int, d_model: int, h: int, d_ff: int, activation: str, norm_first: bool,
         mask: str = "none", dropout: float = 0.0) -> dict:
    """A case: x (B, n, d_model), h heads, d_ff, the activation, pre- or post-norm, its kind of mask and, in
    train() mode, the dropout (0 < dropout < 1, pre-norm: only the scale of what it keeps is compared)."""
    return {"dims": (B, n, d_model, h, d_ff), "activation": activation, "norm_first": norm_first,
            "mask": mask, "dropout": dropout}


def dropping(params) -> bool:
    """A case in train() mode with 0 < dropout < 1."""
    return 0 < params.get("dropout", 0.0) < 1


CASES = [
    Case("post-norm, relu, no mask", 90, dims(2, 5, 12, 4, 20, "relu", False), torch.float32,
         kind="post-norm, no mask"),
    Case("post-norm, gelu, padding mask (B, 1, 1, n)", 91, dims(3, 5, 12, 3, 16, "gelu", False, "padding"),
         kind="post-norm, padding mask"),
    Case("post-norm, relu, causal mask (n, n)", 92, dims(2, 6, 8, 2, 24, "relu", False, "causal"),
         kind="post-norm, causal mask"),
    Case("pre-norm, relu, no mask", 93, dims(2, 5, 12, 4, 20, "relu", True), kind="pre-norm, no mask"),
    Case("pre-norm, gelu, padding and causal mask", 94, dims(2, 6, 12, 3, 16, "gelu", True, "padding+causal"),
         torch.float32, kind="pre-norm, padding and causal mask"),
    Case("pre-norm, relu, a different mask per head", 95, dims(2, 5, 8, 2, 12, "relu", True, "random"),
         kind="pre-norm, a mask per head"),
    Case("pre-norm, relu, padding mask, float32", 96, dims(3, 5, 12, 4, 20, "relu", True, "padding"),
         torch.float32, kind="pre-norm, padding mask"),
    Case("pre-norm, gelu, causal mask, dropout=0.25 in train() mode", 97,
         dims(2, 6, 12, 3, 16, "gelu", True, "causal", 0.25), kind=DROPPING),
]
SCALE = "the scale of what each sublayer's dropout keeps"  # 1 / (1 - p), whatever the masks
#: Each sublayer measured alone: (the parameters zeroed so that the other sublayer adds nothing, it).
ALONE = (({"ffn.linear2.weight", "ffn.linear2.bias"}, "self_attn"),
         ({"self_attn.w_o.weight", "self_attn.w_o.bias"}, "ffn"))


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


def inputs(case: Case, device):
    """x (a leaf), the mask (True = may attend, or None) and the seeded parameters of a case."""
    B, n, d_model, h, d_ff = case.params["dims"]
    g = generator(case.seed)
    x = randn((B, n, d_model), g, case.dtype, device).requires_grad_()
    mask = case_mask(case.params["mask"], (B, h), n, n, g)
    params = seeded_parameters(block_shapes(d_model, d_ff), case, device)
    return x, None if mask is None else mask.to(device), params


def torch_layer(case: Case, p: dict, device, *, swap: dict | None = None, linear: bool = False, **changes):
    """nn.TransformerEncoderLayer holding the parameters ``p``; ``changes``: other arguments,
    ``swap`` other norms (``{"norm1": "norm2"}`` loads norm2 into norm1), ``linear`` no activation."""
    B, n, d, h, d_ff = case.params["dims"]
    options = {"activation": case.params["activation"], "norm_first": case.params["norm_first"], **changes}
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, **options)
    layer = layer.to(device, case.dtype).train()  # dropout is 0; train() keeps PyTorch off its fused path
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
            source = (swap or {}).get(name, name)
            getattr(layer, name).weight.copy_(p[f"{source}.weight"])
            getattr(layer, name).bias.copy_(p[f"{source}.bias"])
    if linear:
        layer.activation = nn.Identity()  # the feed-forward network without its activation
    return layer


def _blocked(case: Case, mask):
    """Our mask as PyTorch's per-head src_mask (True = blocked; a src_key_padding_mask would make
    PyTorch import sympy for its shape check: a second of waiting, once)."""
    B, n, _, h, _ = case.params["dims"]
    return None if mask is None else torch_mask(mask, B, h, n, n)


def torch_outputs(case: Case, device, *, mask_use: str = "ok", **changes):
    """PyTorch's layer with the case's weights: output and gradients under the contract's names;
    ``mask_use`` "inverted" or "ignored" and ``changes`` switch on a known mistake."""
    x, mask, p = inputs(case, device)
    layer = torch_layer(case, p, device, **changes)
    lost = None  # (B, n): tokens with a head that may attend to no key (NaN for them, as 0/0 gives)
    if mask is not None and mask_use == "inverted":
        B, n, _, h, _ = case.params["dims"]
        mask = ~mask
        lost = (~mask.expand(B, h, n, n).any(-1)).any(1)
    blocked = None if mask_use == "ignored" else _blocked(case, mask)
    attn = layer.self_attn
    leaves = {"x": x, "in_proj_weight": attn.in_proj_weight, "in_proj_bias": attn.in_proj_bias,
              "self_attn.w_o.weight": attn.out_proj.weight, "self_attn.w_o.bias": attn.out_proj.bias,
              **{f"ffn.{name}.{kind}": getattr(getattr(layer, name), kind)
                 for name in ("linear1", "linear2") for kind in ("weight", "bias")},
              **{f"{name}.{kind}": getattr(getattr(layer, name), kind)
                 for name in NORMS for kind in ("weight", "bias")}}
    def call():
        y = layer(x, src_mask=blocked)  # (B, n, d_model)
        return (y if lost is None else y.masked_fill(lost[..., None], float("nan")),)

    out = with_gradients(call, ("output",), leaves, case.seed)
    for kind in ("weight", "bias"):
        chunks = out.pop(f"grad in_proj_{kind}").chunk(3)
        out.update(zip((f"grad self_attn.{w}.{kind}" for w in ATTENTION), chunks))
    return out


def arranged_outputs(case: Case, device, arrangement: str):
    """PyTorch's layer's own sublayers put together in a wrong arrangement: "post_norm_sublayer"
    (x + LN(Sublayer(x))), "post_norm_input" (LN(x) + Sublayer(x)), "pre_normed_residual"
    (LN(x) + Sublayer(LN(x))) or "none" (no residual)."""
    x, mask, p = inputs(case, device)
    layer, blocked = torch_layer(case, p, device), _blocked(case, mask)

    def attend(t):
        return layer.self_attn(t, t, t, attn_mask=blocked, need_weights=False)[0]

    def feed(t):
        return layer.linear2(layer.activation(layer.linear1(t)))

    def call():
        y = x
        for sublayer, norm in ((attend, layer.norm1), (feed, layer.norm2)):
            if arrangement == "post_norm_sublayer":
                y = y + norm(sublayer(y))
            elif arrangement == "post_norm_input":
                y = norm(y) + sublayer(y)
            elif arrangement == "pre_normed_residual":
                y = norm(y) + sublayer(norm(y))
            else:  # no residual
                y = sublayer(norm(y)) if case.params["norm_first"] else norm(sublayer(y))
        return (y,)

    return with_gradients(call, ("output",), {"x": x}, case.seed)


def _norm_first(case: Case, device):
    """The other arrangement than norm_first asks for."""
    return torch_outputs(case, device, norm_first=not case.params["norm_first"])


def _relu(case: Case, device):
    if case.params["activation"] != "gelu":
        raise ValueError("relu is right here")  # a variant that cannot run says nothing
    return torch_outputs(case, device, activation="relu")


def _unless_dropping(run):
    """A mistake of the outputs, which a dropout case (its scale alone) cannot show."""
    return lambda case, device: {} if dropping(case.params) else run(case, device)


class TransformerBlockModule(Exercise):
    forbidden = MULTIHEAD
    name = "TransformerBlock"
    reference_name = "nn.TransformerEncoderLayer with the same weights"
    mistakes = {mistake: _unless_dropping(run) for mistake, run in {
        NORM_FIRST_IGNORED: lambda case, device: (_norm_first(case, device) if case.params["norm_first"]
                                                  else {}),
        PRE_FOR_POST: lambda case, device: {} if case.params["norm_first"] else _norm_first(case, device),
        NORMS_SWAPPED: partial(torch_outputs, swap={"norm1": "norm2", "norm2": "norm1"}),
        NORM1_TWICE: partial(torch_outputs, swap={"norm2": "norm1"}),
        NORM2_TWICE: partial(torch_outputs, swap={"norm1": "norm2"}),
        MASK_INVERTED: partial(torch_outputs, mask_use="inverted"),
        MASK_IGNORED: partial(torch_outputs, mask_use="ignored"),
        NO_ACTIVATION: partial(torch_outputs, linear=True),
        NO_RESIDUAL: partial(arranged_outputs, arrangement="none"),
        POST_NORM_SUBLAYER: partial(arranged_outputs, arrangement="post_norm_sublayer"),
        POST_NORM_INPUT: partial(arranged_outputs, arrangement="post_norm_input"),
        PRE_NORMED_RESIDUAL: partial(arranged_outputs, arrangement="pre_normed_residual"),
        RELU: _relu,
    }.items()} | {UNSCALED_DROPOUT: lambda case, device: {SCALE: unscaled_scale(device)}
                  if dropping(case.params) else {}}
    visible_cases = CASES

    def run(self, impl, case, device):
        _, _, d_model, h, d_ff = case.params["dims"]
        rate = {"dropout": case.params["dropout"]} if dropping(case.params) else {}
        module = self.build(impl, case, d_model, h, d_ff, activation=case.params["activation"],
                            norm_first=case.params["norm_first"], **rate)
        expect_block_structure(self.name, module, ("self_attn",), NORMS, HOW)
        x, mask, p = inputs(case, device)
        if rate:
            if not self.probing:  # the dropout case's own first check (off in eval(), on in train())
                self.dropout_modes(impl)
            return {SCALE: self.sublayer_scale(module.to(device), case, x.detach(), mask, p).to(device)}
        params = load_parameters(module.to(device), p, self.name, HOW)

        def call():
            return (expect_tensor(self.call(case, module, x, mask), f"{self.name}'s output", case),)

        return with_gradients(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        if dropping(case.params):
            return {SCALE: dropout_scale(case.params["dropout"], device)}
        return torch_outputs(case, device)

    def sublayer_scale(self, module, case: Case, x: torch.Tensor, mask, p: dict) -> torch.Tensor:
        """Pre-norm in train() mode, each sublayer alone (the other's output layer zeroed, so it adds
        nothing): what the block's output gains over x, against what the sublayer returned, where kept."""
        pairs = []
        for silent, active in ALONE:
            load_parameters(module, {k: v.detach() * (k not in silent) for k, v in p.items()}, self.name, HOW)
            with torch.no_grad():
                out, seen = recorded(module.train(), lambda: expect_tensor(
                    self.call(case, module, x, mask), f"{self.name}'s output", case), (active,))
            pairs.append((seen.get(active), out.double() - x.double()))
        return kept_scale(pairs)

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

    def dropout_modes(self, impl) -> None:
        """Off in eval(), on in train(), at dropout=0.5."""
        FeedForwardModule.dropout(self, impl, randn((2, 6, 8), generator(897), torch.float32), 8, 2, 16,
                                  norm_first=True)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 2, 16, activation="tanh"), UNKNOWN)


@visible_check
def check_TransformerBlock(TransformerBlock) -> None:
    """Against nn.TransformerEncoderLayer with the same weights: post- and pre-norm, relu and gelu,
    no mask, padding, causal, both, and one mask per head; the ValueError and dropout (off in eval(), on in
    train(), what each sublayer's dropout keeps scaled by 1 / (1 - p))."""
    TransformerBlockModule().run_cases(TransformerBlock)
    passed("TransformerBlock matches nn.TransformerEncoderLayer: post- and pre-norm, every kind of mask, "
           "dropout (off in eval(), on in train(), what it keeps scaled by 1 / (1 - p)).")
