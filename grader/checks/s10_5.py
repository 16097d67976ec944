"""Hidden checks for 10.5 The Transformer block.

References: ``nn.Linear`` + ``nn.ReLU``/``nn.GELU`` for ``FeedForward``;
``nn.TransformerEncoderLayer(batch_first=True, dropout=0.0)`` for ``TransformerBlock``, with
the learner's (seeded) weights copied in: ``self_attn.in_proj_weight`` = cat of w_q, w_k,
w_v, ``out_proj`` = w_o, ``linear1``/``linear2`` from the feed-forward network, ``norm1``/
``norm2``. Every parameter, LayerNorm weights and biases included, gets random values, so a
swapped, shared or missing LayerNorm cannot hide behind the default weight 1 and bias 0.

PyTorch's layer runs in ``train()`` mode (dropout is 0): that takes its plain path, not the
fused inference "fast path". Masks are converted to its polarity (True = blocked): a
padding mask as ``src_key_padding_mask``, every other mask as a per-head ``src_mask``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.checks.common import attention_weights, case_mask, reference_merge, reference_split
from grader.checks.core import (
    Case,
    CheckFailure,
    Mistake,
    Outputs,
    call_learner,
    close,
    expect_tensor,
    generator,
    randn,
)
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    expect_value_error,
    forward_backward,
    load_parameters,
    seeded_parameters,
)
from grader.checks.tripwire import MULTIHEAD, Forbidden

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}

# ---------------------------------------------------------------- the feed-forward network

FFN_CASES = [  # B, n, d_model, d_ff
    Case("relu, B=2, n=3, d_model=6, d_ff=10", 800, {"dims": (2, 3, 6, 10), "activation": "relu"}),
    Case("gelu, B=2, n=3, d_model=6, d_ff=10", 801, {"dims": (2, 3, 6, 10), "activation": "gelu"}),
    Case("relu, d_ff smaller than d_model", 802, {"dims": (3, 4, 8, 5), "activation": "relu"}),
    Case("gelu, B=1, n=7, d_model=4, d_ff=16", 803, {"dims": (1, 7, 4, 16), "activation": "gelu"}),
    Case("float32, gelu", 804, {"dims": (2, 5, 12, 20), "activation": "gelu"}, torch.float32),
    Case("float32, relu", 805, {"dims": (2, 5, 12, 20), "activation": "relu"}, torch.float32),
]

FFN_HOW = ("Create self.linear1 = nn.Linear(d_model, d_ff) and self.linear2 = nn.Linear(d_ff, "
           "d_model), in that order; the activation and dropout have no parameters.")


def _ffn_shapes(d_model: int, d_ff: int, prefix: str = "") -> dict[str, tuple]:
    return {f"{prefix}linear1.weight": (d_ff, d_model), f"{prefix}linear1.bias": (d_ff,),
            f"{prefix}linear2.weight": (d_model, d_ff), f"{prefix}linear2.bias": (d_model,)}


def _ffn_inputs(case: Case, device: torch.device):
    B, n, d_model, d_ff = case.params["dims"]
    x = randn((B, n, d_model), generator(case.seed), case.dtype, device).requires_grad_()
    params = {k: v.requires_grad_() for k, v in
              seeded_parameters(_ffn_shapes(d_model, d_ff), case, device).items()}
    return x, params


def ffn(x, p, activation, prefix="", *, variant: str = "ok"):
    """linear2(phi(linear1(x))) from the parameters ``p``; ``variant`` switches on a mistake."""
    hidden = F.linear(x, p[f"{prefix}linear1.weight"], p[f"{prefix}linear1.bias"])
    if variant == "tanh_gelu":
        hidden = F.gelu(hidden, approximate="tanh")
    elif variant == "relu_always":
        hidden = F.relu(hidden)
    elif variant != "no_activation":
        hidden = ACTIVATIONS[activation](hidden)
    out = F.linear(hidden, p[f"{prefix}linear2.weight"], p[f"{prefix}linear2.bias"])
    if variant == "activation_after_linear2":
        out = ACTIVATIONS[activation](out)
    return out


def _ffn_variant(variant: str):
    def run(case: Case, device: torch.device) -> Outputs:
        x, p = _ffn_inputs(case, device)
        return forward_backward(lambda: (ffn(x, p, case.params["activation"], variant=variant),),
                                ("output",), {"x": x, **p}, case.seed)
    return run


FFN_MISTAKES = {
    "no_activation": Mistake("a feed-forward network without its activation",
                             "FFN(x) = linear2(activation(linear1(x))): without the non-linearity "
                             "the two layers collapse into one linear map.",
                             _ffn_variant("no_activation")),
    "relu_always": Mistake("ReLU used although activation='gelu'",
                           "Choose the activation from the activation argument: nn.GELU() for "
                           "'gelu'.", _ffn_variant("relu_always")),
    "tanh_gelu": Mistake("the tanh approximation of GELU",
                         "nn.TransformerEncoderLayer uses the exact GELU: nn.GELU() or F.gelu, "
                         "without approximate='tanh'.", _ffn_variant("tanh_gelu")),
    "activation_after_linear2": Mistake("an activation after linear2 as well",
                                        "Only the hidden layer gets the activation; linear2's "
                                        "output is returned as it is.",
                                        _ffn_variant("activation_after_linear2")),
}


def _torch_ffn(case: Case, device: torch.device) -> Outputs:
    """nn.Linear, nn.ReLU / nn.GELU, nn.Linear holding the case's parameters."""
    d_model, d_ff = case.params["dims"][2:]
    x, p = _ffn_inputs(case, device)
    linear1 = torch.nn.Linear(d_model, d_ff).to(device, case.dtype)
    linear2 = torch.nn.Linear(d_ff, d_model).to(device, case.dtype)
    with torch.no_grad():
        for name, layer in (("linear1", linear1), ("linear2", linear2)):
            layer.weight.copy_(p[f"{name}.weight"])
            layer.bias.copy_(p[f"{name}.bias"])
    phi = torch.nn.ReLU() if case.params["activation"] == "relu" else torch.nn.GELU()
    leaves = {"x": x, "linear1.weight": linear1.weight, "linear1.bias": linear1.bias,
              "linear2.weight": linear2.weight, "linear2.bias": linear2.bias}
    return forward_backward(lambda: (linear2(phi(linear1(x))),), ("output",), leaves, case.seed)


def check_dropout_modes(exercise: str, forbidden: Forbidden, make, x: torch.Tensor) -> None:
    """With dropout=0.5: eval() gives the dropout-free output; train() changes it.

    ``make(dropout)`` builds the learner's module; the two modules share their weights.
    """
    case = Case("dropout=0.5", 899, {}, torch.float32)
    plain = build_module(exercise, forbidden, case, make, 0.0)
    dropping = build_module(exercise, forbidden, case, make, 0.5)
    try:
        dropping.load_state_dict(plain.state_dict())
    except RuntimeError as error:
        raise CheckFailure(f"{exercise}: the module's parameters should not depend on the dropout "
                           f"rate ({str(error).splitlines()[0]}).") from None
    with torch.no_grad():
        want = call_learner(exercise, forbidden, case, plain.eval(), x)
        got = call_learner(exercise, forbidden, case, dropping.eval(), x)
        if not close(got, want, 1e-5, 1e-6):
            raise CheckFailure(f"{exercise} with dropout=0.5 in eval() mode should give the same output "
                               "as with dropout=0.0: use nn.Dropout modules (off in eval mode), not "
                               "F.dropout(..., training=True).")
        trained = call_learner(exercise, forbidden, case, dropping.train(), x)
        if close(trained, want, 1e-5, 1e-6):
            raise CheckFailure(f"{exercise} with dropout=0.5 in train() mode gives the dropout-free "
                               "output: pass the dropout argument to nn.Dropout and apply it.")


class FeedForwardModule(Exercise):
    name = "FeedForward"
    mistakes = FFN_MISTAKES

    def cases(self):
        return FFN_CASES

    def run(self, impl, case, device):
        d_model, d_ff = case.params["dims"][2:]
        module = build_module(self.name, self.forbidden, case, impl, d_model, d_ff,
                              activation=case.params["activation"])
        x, p = _ffn_inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, FFN_HOW)

        def call():
            return (expect_tensor(call_learner(self.name, self.forbidden, case, module, x),
                                  f"{self.name}'s output", case),)

        return forward_backward(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return _torch_ffn(case, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 16, activation="tanh"),
                           "for activation='tanh' (only 'relu' and 'gelu' are known)")
        check_dropout_modes(self.name, self.forbidden,
                            lambda dropout: impl(8, 32, activation="gelu", dropout=dropout),
                            torch.randn(2, 50, 8, generator=generator(898)))

        def on(dev):
            impl(8, 16, activation="gelu").to(dev)(torch.zeros(2, 3, 8, device=dev))

        check_device_independence(self.name, on)


# ---------------------------------------------------------------- the block

BLOCK_CASES = [  # B, n, d_model, h, d_ff
    Case("post-norm, relu, no mask", 820,
         {"dims": (2, 5, 12, 4, 20), "activation": "relu", "norm_first": False, "mask": "none"}),
    Case("post-norm, gelu, padding mask", 821,
         {"dims": (3, 5, 12, 3, 16), "activation": "gelu", "norm_first": False, "mask": "padding"}),
    Case("post-norm, relu, causal mask", 822,
         {"dims": (2, 6, 8, 2, 24), "activation": "relu", "norm_first": False, "mask": "causal"}),
    Case("pre-norm, relu, no mask", 823,
         {"dims": (2, 5, 12, 4, 20), "activation": "relu", "norm_first": True, "mask": "none"}),
    Case("pre-norm, gelu, padding and causal mask", 824,
         {"dims": (2, 6, 12, 3, 16), "activation": "gelu", "norm_first": True,
          "mask": "padding+causal"}),
    Case("pre-norm, relu, a different mask per head", 825,
         {"dims": (2, 5, 8, 2, 12), "activation": "relu", "norm_first": True, "mask": "random"}),
    Case("float32, post-norm, gelu, causal mask", 826,
         {"dims": (2, 6, 12, 4, 20), "activation": "gelu", "norm_first": False, "mask": "causal"},
         torch.float32),
    Case("float32, pre-norm, relu, padding mask", 827,
         {"dims": (3, 5, 12, 4, 20), "activation": "relu", "norm_first": True, "mask": "padding"},
         torch.float32),
]

BLOCK_HOW = ("Create self.self_attn = MultiHeadAttention(d_model, num_heads), self.ffn = "
             "FeedForward(d_model, d_ff, activation, dropout), self.norm1 and self.norm2 = "
             "nn.LayerNorm(d_model), in that order.")
PROJECTIONS = ("w_q", "w_k", "w_v", "w_o")


def block_shapes(d_model: int, d_ff: int) -> dict[str, tuple]:
    """The contract's parameter names and shapes, in creation order."""
    shapes: dict[str, tuple] = {}
    for w in PROJECTIONS:
        shapes[f"self_attn.{w}.weight"] = (d_model, d_model)
        shapes[f"self_attn.{w}.bias"] = (d_model,)
    shapes.update(_ffn_shapes(d_model, d_ff, prefix="ffn."))
    for norm in ("norm1", "norm2"):
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


def _torch_block(case: Case, device: torch.device) -> Outputs:
    """nn.TransformerEncoderLayer with the case's weights; gradients renamed to the contract's."""
    B, n, d_model, h, d_ff = case.params["dims"]
    x, mask, p = block_inputs(case, device)
    layer = torch.nn.TransformerEncoderLayer(
        d_model, h, d_ff, dropout=0.0, activation=case.params["activation"], batch_first=True,
        norm_first=case.params["norm_first"]).to(device, case.dtype)
    layer.train()  # dropout is 0; train mode keeps PyTorch off its fused inference path
    attn = layer.self_attn
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.cat([p[f"self_attn.{w}.weight"] for w in PROJECTIONS[:3]]))
        attn.in_proj_bias.copy_(torch.cat([p[f"self_attn.{w}.bias"] for w in PROJECTIONS[:3]]))
        attn.out_proj.weight.copy_(p["self_attn.w_o.weight"])
        attn.out_proj.bias.copy_(p["self_attn.w_o.bias"])
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(p[f"ffn.{name}.weight"])
            getattr(layer, name).bias.copy_(p[f"ffn.{name}.bias"])
        for name in ("norm1", "norm2"):
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
                 for name in ("norm1", "norm2") for kind in ("weight", "bias")}}
    outputs = forward_backward(lambda: (layer(x, **masks),), ("output",), leaves, case.seed)
    for kind in ("weight", "bias"):
        chunks = outputs.pop(f"grad in_proj_{kind}").chunk(3)
        outputs.update({f"grad self_attn.{w}.{kind}": g for w, g in zip(PROJECTIONS, chunks)})
    return {"output": outputs.pop("output"), "grad x": outputs.pop("grad x"),
            **{f"grad {k}": outputs[f"grad {k}"] for k in block_shapes(d_model, d_ff)}}


def block_forward(x, p, mask, num_heads, activation, norm_first, *, arrangement=None,
                  norms=("norm1", "norm2"), ffn_variant="ok", mask_variant="ok"):
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
                                   num_heads) for w in PROJECTIONS[:3])
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


def _block_variant(**switch):
    def run(case: Case, device: torch.device) -> Outputs:
        h = case.params["dims"][3]
        x, mask, p = block_inputs(case, device)

        def call():
            return (block_forward(x, p, mask, h, case.params["activation"],
                                  case.params["norm_first"], **switch),)

        return forward_backward(call, ("output",), {"x": x, **p}, case.seed)
    return run


POST = "Post-norm (norm_first=False) adds first, then normalises the sum: x = norm1(x + attention(x))."
PRE = "Pre-norm (norm_first=True) normalises the sub-layer's input only: x = x + attention(norm1(x))."

BLOCK_MISTAKES = {
    "norm_first_ignored": Mistake("post-norm computed although norm_first=True (norm_first ignored)",
                                  PRE, _block_variant(arrangement="post")),
    "pre_for_post": Mistake("pre-norm computed although norm_first=False",
                            POST, _block_variant(arrangement="pre")),
    "post_norm_sublayer": Mistake(
        "the norm before the residual add: the sub-layer's output normalised, x + LN(Sublayer(x))",
        POST, _block_variant(arrangement="post_norm_sublayer")),
    "post_norm_input": Mistake("the norm before the residual add: LN(x) + Sublayer(x)",
                               POST, _block_variant(arrangement="post_norm_input")),
    "pre_normed_residual": Mistake(
        "the pre-norm residual taken from the normalised input: LN(x) + Sublayer(LN(x))",
        "Keep the raw x on the residual path: h = norm1(x); x = x + attention(h).",
        _block_variant(arrangement="pre_normed_residual")),
    "no_residual": Mistake("a missing residual connection",
                           "Add each sub-layer's input back to its output (x + ...).",
                           _block_variant(arrangement="no_residual")),
    "norms_swapped": Mistake("norm1 and norm2 swapped",
                             "norm1 belongs to the attention sub-layer, norm2 to the feed-forward "
                             "sub-layer.", _block_variant(norms=("norm2", "norm1"))),
    "norm1_twice": Mistake("one LayerNorm (norm1) used for both sub-layers",
                           "Each sub-layer has its own LayerNorm: norm1 with attention, norm2 with "
                           "the feed-forward network.", _block_variant(norms=("norm1", "norm1"))),
    "norm2_twice": Mistake("one LayerNorm (norm2) used for both sub-layers",
                           "Each sub-layer has its own LayerNorm: norm1 with attention, norm2 with "
                           "the feed-forward network.", _block_variant(norms=("norm2", "norm2"))),
    "no_activation": Mistake("a feed-forward network without its activation",
                             "FFN(x) = linear2(activation(linear1(x))).",
                             _block_variant(ffn_variant="no_activation")),
    "mask_inverted": Mistake("the mask inverted",
                             "True means *may attend*: pass the mask to self_attn unchanged "
                             "(PyTorch's src_key_padding_mask uses the opposite polarity).",
                             _block_variant(mask_variant="inverted")),
    "mask_ignored": Mistake("the mask not passed to the attention",
                            "Call self.self_attn(x, x, x, mask).",
                            _block_variant(mask_variant="ignored")),
}


def check_structure(exercise: str, module: torch.nn.Module) -> None:
    """Clear messages for structural mistakes before the parameters are loaded."""
    norm1, norm2 = getattr(module, "norm1", None), getattr(module, "norm2", None)
    if norm1 is not None and norm1 is norm2:
        raise CheckFailure(f"{exercise}: norm1 and norm2 are one shared LayerNorm. Each sub-layer "
                           "needs its own: self.norm1 = nn.LayerNorm(d_model) and self.norm2 = "
                           "nn.LayerNorm(d_model).")
    for name, norm in (("norm1", norm1), ("norm2", norm2)):
        if isinstance(norm, torch.nn.LayerNorm) and norm.eps != 1e-5:
            raise CheckFailure(f"{exercise}: {name} has eps={norm.eps}; nn.TransformerEncoderLayer "
                               "uses nn.LayerNorm's default eps=1e-5.")


class TransformerBlockModule(Exercise):
    name = "TransformerBlock"
    forbidden = MULTIHEAD
    mistakes = BLOCK_MISTAKES

    def cases(self):
        return BLOCK_CASES

    def run(self, impl, case, device):
        _, _, d_model, h, d_ff = case.params["dims"]
        module = build_module(self.name, self.forbidden, case, impl, d_model, h, d_ff,
                              activation=case.params["activation"],
                              norm_first=case.params["norm_first"])
        check_structure(self.name, module)
        x, mask, p = block_inputs(case, device)
        params = load_parameters(module.to(device), p, self.name, BLOCK_HOW)

        def call():
            out = call_learner(self.name, self.forbidden, case, module, x, mask)
            return (expect_tensor(out, f"{self.name}'s output", case),)

        return forward_backward(call, ("output",), {"x": x, **params}, case.seed)

    def reference(self, case, device):
        return _torch_block(case, device)

    def evaluate(self, case, got, device):
        """NaN outputs first: they come from queries left without a key (an inverted mask)."""
        out = got.get("output")
        if out is not None and not bool(torch.isfinite(out).all()):
            message = (f"{self.name}: the output has inf or NaN entries in {case}. A query that may "
                       "attend to no key gets NaN attention weights.")
            inverted = self.mistakes["mask_inverted"].run(case, device)["output"]
            if inverted.shape == out.shape and torch.equal(~torch.isfinite(inverted),
                                                           ~torch.isfinite(out)):
                mistake = self.mistakes["mask_inverted"]
                message += f"\nThis looks like {mistake.description}. {mistake.hint}"
            raise CheckFailure(message)
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        expect_value_error(self.name, lambda: impl(8, 2, 16, activation="tanh"),
                           "for activation='tanh' (only 'relu' and 'gelu' are known)")
        check_dropout_modes(self.name, self.forbidden,
                            lambda dropout: impl(8, 2, 16, dropout=dropout, norm_first=True),
                            torch.randn(2, 6, 8, generator=generator(897)))

        def on(dev):
            module = impl(8, 2, 16, activation="gelu", norm_first=True).to(dev)
            module(torch.zeros(2, 3, 8, device=dev), torch.ones(2, 1, 1, 3, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)


feed_forward = FeedForwardModule()
transformer_block = TransformerBlockModule()
EXERCISES = [feed_forward, transformer_block]
check_FeedForward = feed_forward.check
check_TransformerBlock = transformer_block.check
