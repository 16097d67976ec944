"""Visible checks of 10.5 The Transformer block.

References: ``nn.Linear`` and ``nn.ReLU``/``nn.GELU`` for ``FeedForward``;
``nn.TransformerEncoderLayer(batch_first=True, dropout=0.0)`` holding the learner's weights
for ``TransformerBlock``. Every parameter, LayerNorms included, gets seeded random values,
so swapped or shared norms cannot hide behind weight 1 and bias 0. Wrong variants come
from the same PyTorch layer with other arguments (``norm_first`` flipped, the mask
inverted or left out, the norms exchanged) or from its own sublayers put together wrongly.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import expect_distinct as check_distinct
from course.checking import expect_linear_layers as check_layers
from course.compare import Mistake, close
from course.testing import (
    VisibleCheckFailure,
    check_outputs,
    check_tensor,
    expect_value_error,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)

# ---------------------------------------------------------------- the feed-forward network

FFN_HOW = ("Create, in this order, linear1 (an nn.Linear(d_model, d_ff)) and linear2 (an nn.Linear(d_ff, "
           "d_model)); the activation and dropout have no parameters.")
FFN_CASES = [  # name, B, n, d_model, d_ff, activation, dtype
    ("relu, B=2, n=3, d_model=6, d_ff=10", 2, 3, 6, 10, "relu", torch.float32),
    ("gelu, float64", 2, 3, 6, 10, "gelu", torch.float64),
    ("relu, d_ff smaller than d_model, float64", 3, 4, 8, 5, "relu", torch.float64),
    ("gelu, B=1, n=7, d_model=4, d_ff=16", 1, 7, 4, 16, "gelu", torch.float32),
]
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}


def seed_parameters(module: nn.Module, seed: int) -> None:
    """Seeded random values for every parameter (LayerNorm weights and biases included)."""
    with torch.no_grad():
        for i, p in enumerate(module.parameters()):
            p.copy_(seeded(*p.shape, seed=seed + i, scale=0.5))


def _ffn_outputs(module, call, B, n, d, dtype, seed):
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    module.zero_grad()
    return with_gradients(lambda: (call(x),), ("output",), {"x": x, **dict(module.named_parameters())}, seed)


def _torch_ffn(module, activation: str, *, variant: str = "ok"):
    """x -> linear2(activation(linear1(x))) with PyTorch's layers and the module's weights."""
    def call(x):
        hidden = F.linear(x, module.linear1.weight, module.linear1.bias)
        if variant == "tanh":
            hidden = F.gelu(hidden, approximate="tanh")
        elif variant == "relu":
            hidden = F.relu(hidden)
        elif variant == "gelu":
            hidden = F.gelu(hidden)
        elif variant != "none":
            hidden = ACTIVATIONS[activation]()(hidden)
        out = F.linear(hidden, module.linear2.weight, module.linear2.bias)
        return ACTIVATIONS[activation]()(out) if variant == "twice" else out
    return call


def check_dropout_modes(what: str, make, x: torch.Tensor) -> None:
    """With dropout=0.5: eval() gives the dropout-free output; train() changes it."""
    plain = run_learner(what, "dropout=0.0", make, 0.0)
    dropping = run_learner(what, "dropout=0.5", make, 0.5)
    try:
        dropping.load_state_dict(plain.state_dict())
    except RuntimeError as error:
        raise VisibleCheckFailure(f"{what}: the module's parameters should not depend on the dropout rate "
                                  f"({str(error).splitlines()[0]}).") from None
    with torch.no_grad():
        want = run_learner(what, "dropout=0.0, eval()", plain.eval(), x)
        got = run_learner(what, "dropout=0.5, eval()", dropping.eval(), x)
        if not close(got, want, 1e-5, 1e-6):
            raise VisibleCheckFailure(f"{what} with dropout=0.5 in eval() mode should give the same output "
                                      "as with dropout=0.0: use nn.Dropout modules (off in eval mode), not "
                                      "F.dropout(..., training=True).")
        if close(run_learner(what, "dropout=0.5, train()", dropping.train(), x), want, 1e-5, 1e-6):
            raise VisibleCheckFailure(f"{what} with dropout=0.5 in train() mode gives the dropout-free "
                                      "output: pass the dropout argument to nn.Dropout and apply it.")


@instant
def check_FeedForward(FeedForward) -> None:
    """Its layers, relu and gelu against PyTorch (gradients too), the ValueError, dropout."""
    expect_value_error("FeedForward", lambda: FeedForward(8, 16, activation="tanh"),
                       "for activation='tanh' (only 'relu' and 'gelu' are known)")
    for seed, (case, B, n, d, d_ff, activation, dtype) in enumerate(FFN_CASES):
        module = run_learner("FeedForward", case, FeedForward, d, d_ff, activation=activation)
        if not isinstance(module, nn.Module):
            raise VisibleCheckFailure("FeedForward(...) should create an nn.Module.")
        check_layers(module, "FeedForward", {"linear1": (d_ff, d), "linear2": (d, d_ff)}, FFN_HOW, bias=True)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype)

        def learner(x, case=case, module=module):
            return check_tensor(run_learner("FeedForward", case, module, x), "FeedForward's output")

        def variant(kind, module=module, spec=(B, n, d, dtype, seed), activation=activation):
            return partial(_ffn_outputs, module, _torch_ffn(module, activation, variant=kind), *spec)

        mistakes = {
            "no_activation": Mistake("a feed-forward network without its activation",
                                     "FFN(x) = linear2(activation(linear1(x))): without the non-linearity "
                                     "the two layers collapse into one linear map.", variant("none")),
            "relu_always": Mistake("ReLU used although activation='gelu'",
                                   "Choose the activation from the activation argument: nn.GELU() for "
                                   "'gelu'.",
                                   variant("relu")),
            "gelu_always": Mistake("GELU used although activation='relu'", "Choose the activation from the "
                                   "activation argument: nn.ReLU() for 'relu'.", variant("gelu")),
            "tanh_gelu": Mistake("the tanh approximation of GELU", "nn.TransformerEncoderLayer uses the "
                                 "exact GELU: nn.GELU() or F.gelu, without approximate='tanh'.",
                                 variant("tanh")),
            "twice": Mistake("an activation after linear2 as well", "Only the hidden layer gets the "
                             "activation; linear2's output is returned as it is.", variant("twice")),
        }
        check_outputs(_ffn_outputs(module, learner, B, n, d, dtype, seed),
                      _ffn_outputs(module, _torch_ffn(module, activation), B, n, d, dtype, seed),
                      f"FeedForward(activation='{activation}')", case,
                      against=f"nn.Linear, nn.{ACTIVATIONS[activation].__name__}(), nn.Linear with the same "
                      "weights", mistakes=mistakes)
    check_dropout_modes("FeedForward", lambda p: FeedForward(8, 32, activation="gelu", dropout=p),
                        seeded(2, 50, 8, seed=898))
    passed("FeedForward has the right layers, both activations, dropout, and rejects unknown activations.")


# ---------------------------------------------------------------- the block

BLOCK_HOW = ("Create, in this order, self_attn (a MultiHeadAttention(d_model, num_heads)), ffn (a "
             "FeedForward(d_model, d_ff, activation, dropout)), norm1 and norm2 (two nn.LayerNorm(d_model)).")
BLOCK_CASES = [  # name, B, n, d_model, h, d_ff, activation, norm_first, mask, dtype
    ("post-norm, relu, no mask", 2, 5, 12, 4, 20, "relu", False, None, torch.float32),
    ("post-norm, gelu, padding mask (B, 1, 1, n)", 3, 5, 12, 3, 16, "gelu", False, "padding", torch.float64),
    ("pre-norm, relu, causal mask (n, n)", 2, 6, 8, 2, 24, "relu", True, "causal", torch.float64),
    ("pre-norm, gelu, padding and causal mask", 2, 6, 12, 3, 16, "gelu", True, "padding+causal",
     torch.float32),
    ("post-norm, relu, a different mask per head", 2, 5, 8, 2, 12, "relu", False, "random", torch.float64),
]
ATTENTION = ("w_q", "w_k", "w_v", "w_o")


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


def torch_mask(mask, B, h, n_q, n_k):
    """Our mask (True = may attend, broadcastable) as PyTorch's (B*h, n_q, n_k), True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)


def copy_into_torch(layer: nn.Module, module: nn.Module, *, swap: dict[str, str] | None = None) -> nn.Module:
    """Load an encoder or decoder block's weights into an nn.Transformer*Layer; returns the layer.

    ``w_q``, ``w_k``, ``w_v`` go into ``in_proj_*`` (stacked), ``cross_attn`` is PyTorch's
    ``multihead_attn``, ``ffn.linearX`` its ``linearX``; ``swap`` maps norms to other norms
    (``{"norm1": "norm2"}`` loads our norm2 into PyTorch's norm1).
    """
    mine = dict(module.named_parameters())
    with torch.no_grad():
        for attention, theirs in (("self_attn", "self_attn"), ("cross_attn", "multihead_attn")):
            if not hasattr(layer, theirs) or f"{attention}.w_q.weight" not in mine:
                continue
            target = getattr(layer, theirs)
            target.in_proj_weight.copy_(torch.cat([mine[f"{attention}.{w}.weight"] for w in ATTENTION[:3]]))
            target.in_proj_bias.copy_(torch.cat([mine[f"{attention}.{w}.bias"] for w in ATTENTION[:3]]))
            target.out_proj.weight.copy_(mine[f"{attention}.w_o.weight"])
            target.out_proj.bias.copy_(mine[f"{attention}.w_o.bias"])
        for name in ("linear1", "linear2"):
            getattr(layer, name).weight.copy_(mine[f"ffn.{name}.weight"])
            getattr(layer, name).bias.copy_(mine[f"ffn.{name}.bias"])
        for norm in ("norm1", "norm2", "norm3"):
            source = (swap or {}).get(norm, norm)
            if hasattr(layer, norm) and f"{source}.weight" in mine:
                getattr(layer, norm).weight.copy_(mine[f"{source}.weight"])
                getattr(layer, norm).bias.copy_(mine[f"{source}.bias"])
    return layer


def block_parameter_names(attentions, norms) -> set[str]:
    """The contract's parameter names of an encoder or decoder block."""
    names = {f"{a}.{w}.{k}" for a in attentions for w in ATTENTION for k in ("weight", "bias")}
    names |= {f"ffn.linear{i}.{k}" for i in (1, 2) for k in ("weight", "bias")}
    return names | {f"{norm}.{k}" for norm in norms for k in ("weight", "bias")}


def check_block_structure(what: str, module: nn.Module, attentions, norms, how: str) -> None:
    """The contract's submodules, all distinct, LayerNorms with PyTorch's eps, no other parameters."""
    if not isinstance(module, nn.Module):
        raise VisibleCheckFailure(f"{what}(...) should create an nn.Module, not a {type(module).__name__}.")
    for name in (*attentions, "ffn", *norms):
        if not isinstance(getattr(module, name, None), nn.Module):
            raise VisibleCheckFailure(f"{what} needs a submodule self.{name}. {how}")
    check_distinct(module, what, (*attentions, "ffn", *norms), how)
    for name in norms:
        norm = getattr(module, name)
        if isinstance(norm, nn.LayerNorm) and norm.eps != 1e-5:
            raise VisibleCheckFailure(f"{what}: {name} has eps={norm.eps}; PyTorch's layers use "
                                      "nn.LayerNorm's default eps=1e-5.")
    have, want = set(dict(module.named_parameters())), block_parameter_names(attentions, norms)
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        detail = "; ".join(part for part in (f"missing {', '.join(missing)}" if missing else "",
                                             f"unexpected {', '.join(extra)}" if extra else "") if part)
        raise VisibleCheckFailure(f"{what} has the wrong parameters ({detail}). {how}")


def _block_layer(module, spec, **changes):
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


def _through_layer(layer, spec, *, mask_use: str = "ok"):
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


def _block_outputs(call, spec, seed):
    case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec
    x = seeded(B, n, d, seed=seed, dtype=dtype).requires_grad_()
    mask = block_mask(kind, B, h, n, seed)
    return with_gradients(lambda: (call(x, mask),), ("output",), {"x": x}, seed)


def block_mistakes(module, spec, seed) -> dict[str, Mistake]:
    norm_first, activation = spec[7], spec[6]
    post = "Post-norm (norm_first=False) adds first, then normalises the sum: x = norm1(x + attention(x))."
    pre = "Pre-norm (norm_first=True) normalises the sub-layer's input only: x = x + attention(norm1(x))."

    def layer(mask_use="ok", **changes):  # built only when needed, to name a mistake
        return lambda: _block_outputs(_through_layer(_block_layer(module, spec, **changes), spec,
                                                     mask_use=mask_use), spec, seed)

    def arranged(arrangement):
        return lambda: _block_outputs(_arranged(_block_layer(module, spec), spec, arrangement), spec, seed)

    mistakes = {
        "norm_first": Mistake(f"{'post' if norm_first else 'pre'}-norm computed although norm_first="
                              f"{norm_first}", pre if norm_first else post, layer(norm_first=not norm_first)),
        "norms_swapped": Mistake("norm1 and norm2 swapped", "norm1 belongs to the attention sub-layer, norm2 "
                                 "to the feed-forward sub-layer.",
                                 layer(swap={"norm1": "norm2", "norm2": "norm1"})),
        "norm1_twice": Mistake("one LayerNorm (norm1) used for both sub-layers", "Each sub-layer has its own "
                               "LayerNorm: norm1 with attention, norm2 with the feed-forward network.",
                               layer(swap={"norm2": "norm1"})),
        "norm2_twice": Mistake("one LayerNorm (norm2) used for both sub-layers", "Each sub-layer has its own "
                               "LayerNorm: norm1 with attention, norm2 with the feed-forward network.",
                               layer(swap={"norm1": "norm2"})),
        "mask_inverted": Mistake("the mask inverted", "True means *may attend*: pass the mask to self_attn "
                                 "unchanged (PyTorch's masks use the opposite polarity).",
                                 layer(mask_use="inverted")),
        "mask_ignored": Mistake("the mask not passed to the attention", "Call self.self_attn(x, x, x, mask).",
                                layer(mask_use="ignored")),
        "no_activation": Mistake("a feed-forward network without its activation",
                                 "FFN(x) = linear2(activation(linear1(x))).", layer(linear=True)),
        "no_residual": Mistake("a missing residual connection",
                               "Add each sub-layer's input back to its output (x + ...).", arranged("none")),
        "post_norm_sublayer": Mistake("the norm before the residual add: the sub-layer's output normalised, "
                                      "x + LN(Sublayer(x))", post, arranged("post_norm_sublayer")),
        "post_norm_input": Mistake("the norm before the residual add: LN(x) + Sublayer(x)", post,
                                   arranged("post_norm_input")),
        "pre_normed_residual": Mistake("the pre-norm residual taken from the normalised input: "
                                       "LN(x) + Sublayer(LN(x))", "Keep the raw x on the residual path: "
                                       "h = norm1(x); x = x + attention(h).",
                                       arranged("pre_normed_residual")),
    }
    if activation == "gelu":
        mistakes["relu"] = Mistake("ReLU although activation='gelu'", "Pass activation to FeedForward.",
                                   layer(activation="relu"))
    return mistakes


@instant
def check_TransformerBlock(TransformerBlock) -> None:
    """Against nn.TransformerEncoderLayer with the same weights: post- and pre-norm, relu and gelu,
    no mask, padding, causal, both, and one mask per head; the ValueError and dropout."""
    expect_value_error("TransformerBlock", lambda: TransformerBlock(8, 2, 16, activation="tanh"),
                       "for activation='tanh' (only 'relu' and 'gelu' are known)")
    for seed, spec in enumerate(BLOCK_CASES):
        case, B, n, d, h, d_ff, activation, norm_first, kind, dtype = spec
        module = run_learner("TransformerBlock", case, TransformerBlock, d, h, d_ff, activation=activation,
                             norm_first=norm_first)
        check_block_structure("TransformerBlock", module, ("self_attn",), ("norm1", "norm2"), BLOCK_HOW)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype)

        def learner(x, mask, case=case, module=module):
            return check_tensor(run_learner("TransformerBlock", case, module, x, mask),
                                "TransformerBlock's output")

        got = _block_outputs(learner, spec, seed)
        want = _block_outputs(_through_layer(_block_layer(module, spec), spec), spec, seed)
        check_outputs(got, want, "TransformerBlock", case,
                      against="nn.TransformerEncoderLayer with the same weights",
                      mistakes=block_mistakes(module, spec, seed))
    check_dropout_modes("TransformerBlock", lambda p: TransformerBlock(8, 2, 16, dropout=p, norm_first=True),
                        seeded(2, 6, 8, seed=897))
    passed("TransformerBlock matches nn.TransformerEncoderLayer: post- and pre-norm, every kind of mask.")
