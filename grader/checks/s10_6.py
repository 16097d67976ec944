"""Hidden checks for 10.6 The encoder-decoder architecture.

References:

* ``causal_mask``: ``torch.ones(n, n, dtype=torch.bool).tril()``.
* ``padding_mask``: ``(tokens != pad_id)`` viewed as ``(B, 1, 1, n)``.
* ``DecoderBlock``: ``nn.TransformerDecoderLayer(batch_first=True)`` with the learner's
  (seeded) weights copied in and the masks converted to its polarity (True = blocked).
* ``Transformer``: ``nn.TransformerEncoder`` / ``nn.TransformerDecoder`` built from copied
  layers, with the notebook's conventions around them: embeddings plus the sinusoidal
  table (not scaled by sqrt(d_model)), a final LayerNorm after each stack **only when
  norm_first=True** (a post-norm block already ends with one), a final ``nn.Linear``.
  Causality and padding are also checked as properties of the learner's own model.
* ``greedy_decode``: a stub model whose next token follows a script for each sentence.

Every wrong-answer diagnosis comes from a functional model with one mistake switched on.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course.compare import close_score
from grader.checks.common import attention_weights, sinusoidal_table
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
    tolerance,
)
from grader.checks.exercise import (
    Exercise,
    build_module,
    check_device_independence,
    check_unplaced_tensors,
    forward_backward,
    load_parameters,
    seeded_parameters,
)
from grader.checks.tripwire import ATTENTION, MULTIHEAD

FORBIDDEN = ATTENTION | MULTIHEAD


def _as_float(mask: torch.Tensor) -> torch.Tensor:
    """A bool mask as float64 0/1, so the usual comparison and records apply."""
    return mask.to(torch.float64)


def _expect_bool(value, what: str, case: Case) -> torch.Tensor:
    mask = expect_tensor(value, what, case)
    if mask.dtype != torch.bool:
        raise CheckFailure(
            f"{what} should be a bool tensor (True = may attend), but has dtype {mask.dtype} in "
            f"{case}. Build it with a comparison (tokens != pad_id) or dtype=torch.bool.")
    return mask


# ---------------------------------------------------------------- causal_mask

CAUSAL_CASES = [Case(f"n={n}", 700 + n, {"n": n}) for n in (5, 2, 7, 1)]  # n=1 last: ambiguous


def _causal_with(fn, case: Case) -> Outputs:
    return {"mask": _as_float(fn(case.params["n"]))}


CAUSAL_MISTAKES = {
    "no_diagonal": Mistake(
        "a mask without its diagonal (tril(diagonal=-1))",
        "A token may attend to itself: keep the diagonal, torch.ones(n, n).tril() "
        "(diagonal=0). Without it the first token has nothing to attend to.",
        lambda c, d: _causal_with(lambda n: torch.ones(n, n).tril(-1), c)),
    "inverted": Mistake(
        "the causal mask inverted (True above the diagonal)",
        "True means *may attend*: query i may see keys 0..i, on and below the diagonal. "
        "nn.Transformer's masks use the opposite polarity.",
        lambda c, d: _causal_with(lambda n: torch.ones(n, n).triu(1), c)),
    "upper": Mistake(
        "an upper-triangular mask (triu): every token sees the future, not the past",
        "Use tril: row i (a query) is True in columns 0..i (the keys it may see).",
        lambda c, d: _causal_with(lambda n: torch.ones(n, n).triu(), c)),
}


class CausalMask(Exercise):
    name = "causal_mask"
    reference_name = "torch.ones(n, n, dtype=torch.bool).tril()"
    mistakes = CAUSAL_MISTAKES

    def cases(self):
        return CAUSAL_CASES

    def run(self, impl, case, device):
        def learner(n):
            return _expect_bool(call_learner(self.name, self.forbidden, case, impl, n, device=device),
                                "causal_mask's result", case)
        return _causal_with(learner, case)

    def reference(self, case, device):
        return _causal_with(lambda n: torch.ones(n, n, dtype=torch.bool, device=device).tril(), case)

    def extra_checks(self, impl, device):
        for where in (torch.device("meta"), "meta"):
            mask = call_learner(self.name, self.forbidden, CAUSAL_CASES[0], impl, 5, device=where)
            if expect_tensor(mask, "causal_mask's result", CAUSAL_CASES[0]).device.type != "meta":
                raise CheckFailure(
                    f"causal_mask(5, device={where!r}) returned a tensor on {mask.device}: create "
                    "the mask on the device you are given (torch.ones(n, n, dtype=torch.bool, "
                    "device=device)).")


# ---------------------------------------------------------------- padding_mask

PADDING_CASES = [  # (lengths or explicit rows), pad_id
    Case("B=2, n=5, padding at the end", 710, {"rows": [[5, 9, 4, 7, 0], [6, 8, 0, 0, 0]], "pad": 0}),
    Case("B=3, n=4, no padding", 711, {"rows": [[4, 5, 6, 7], [7, 6, 5, 4], [1, 2, 3, 9]], "pad": 0}),
    Case("pad_id=5 (and 0 is a real word)", 712,
         {"rows": [[0, 3, 8, 5, 5, 5], [7, 0, 1, 2, 9, 5], [4, 4, 0, 5, 5, 5]], "pad": 5}),
    Case("padding at the start", 713, {"rows": [[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]], "pad": 0}),
]


def _tokens(case: Case, device) -> torch.Tensor:
    return torch.tensor(case.params["rows"], dtype=torch.long, device=device)  # (B, n)


def _padding_with(fn, case: Case, device) -> Outputs:
    return {"mask": _as_float(fn(_tokens(case, device), case.params["pad"]))}


PADDING_MISTAKES = {
    "inverted": Mistake(
        "the padding mask inverted (True at the padding)",
        "True means *may attend*: True for real tokens, tokens != pad_id.",
        lambda c, d: _padding_with(lambda t, p: (t == p)[:, None, None, :], c, d)),
    "pad_zero": Mistake(
        "a mask that ignores pad_id and treats id 0 as the padding",
        "Compare with the pad_id argument, not with 0.",
        lambda c, d: _padding_with(lambda t, p: (t != 0)[:, None, None, :], c, d)),
}

PADDING_SHAPE_HINT = (
    "The padding mask hides *keys*: it must broadcast against scores of shape "
    "(B, h, n_q, n_k), so it has shape (B, 1, 1, n): one entry per key, the same for every "
    "head and every query. Index it as (tokens != pad_id)[:, None, None, :].")


class PaddingMask(Exercise):
    name = "padding_mask"
    reference_name = "tokens != pad_id, shaped (B, 1, 1, n)"
    mistakes = PADDING_MISTAKES

    def cases(self):
        return PADDING_CASES

    def run(self, impl, case, device):
        def learner(tokens, pad_id):
            return _expect_bool(call_learner(self.name, self.forbidden, case, impl, tokens, pad_id),
                                "padding_mask's result", case)
        return _padding_with(learner, case, device)

    def reference(self, case, device):
        return _padding_with(lambda t, p: (t != p)[:, None, None, :], case, device)

    def evaluate(self, case, got, device):
        want = self.expected(case, device)["mask"]
        have = got["mask"]
        if tuple(have.shape) != tuple(want.shape):
            raise CheckFailure(
                f"padding_mask should return shape {tuple(want.shape)} = (B, 1, 1, n) in {case}, "
                f"but returned {tuple(have.shape)}. {PADDING_SHAPE_HINT}")
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        check_device_independence(
            self.name, lambda dev: impl(torch.zeros(2, 5, dtype=torch.long, device=dev), 0))


# ---------------------------------------------------------------- parameters and torch's layout

ATTENTION = ("w_q", "w_k", "w_v", "w_o")


def block_shapes(d_model: int, d_ff: int, decoder: bool) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of a TransformerBlock (or DecoderBlock), in creation order."""
    shapes: dict[str, tuple[int, ...]] = {}
    for attention in ("self_attn", "cross_attn") if decoder else ("self_attn",):
        for w in ATTENTION:
            shapes[f"{attention}.{w}.weight"] = (d_model, d_model)
            shapes[f"{attention}.{w}.bias"] = (d_model,)
    shapes.update({"ffn.linear1.weight": (d_ff, d_model), "ffn.linear1.bias": (d_ff,),
                   "ffn.linear2.weight": (d_model, d_ff), "ffn.linear2.bias": (d_model,)})
    for norm in ("norm1", "norm2", "norm3") if decoder else ("norm1", "norm2"):
        shapes[f"{norm}.weight"] = (d_model,)
        shapes[f"{norm}.bias"] = (d_model,)
    return shapes


def _torch_slot(layer: nn.Module, name: str) -> tuple[torch.Tensor, int | None]:
    """Where our parameter ``name`` lives in an nn.Transformer*Layer: (tensor, chunk or None).

    ``self_attn.w_k.weight`` is chunk 1 of ``self_attn.in_proj_weight``; ``cross_attn`` is
    torch's ``multihead_attn``; ``ffn.linear1`` is ``linear1``; norms keep their names.
    """
    parts = name.split(".")
    if parts[0] in ("self_attn", "cross_attn"):
        attention = getattr(layer, "self_attn" if parts[0] == "self_attn" else "multihead_attn")
        w, kind = parts[1], parts[2]
        if w == "w_o":
            return getattr(attention.out_proj, kind), None
        return getattr(attention, f"in_proj_{kind}"), ATTENTION.index(w)
    if parts[0] == "ffn":
        return getattr(getattr(layer, parts[1]), parts[2]), None
    return getattr(getattr(layer, parts[0]), parts[1]), None


def copy_into_torch_layer(layer: nn.Module, values: Mapping[str, torch.Tensor], prefix: str = "") -> None:
    """Load our-named values (``prefix`` + name) into a torch Transformer layer."""
    with torch.no_grad():
        for full, value in values.items():
            if not full.startswith(prefix):
                continue
            tensor, chunk = _torch_slot(layer, full[len(prefix):])
            (tensor if chunk is None else tensor.chunk(3)[chunk]).copy_(value)


def torch_layer_grads(layer: nn.Module, names, prefix: str = "") -> Outputs:
    """The gradients of a torch layer's parameters, under our names (``grad <prefix><name>``)."""
    grads = {}
    for full in names:
        if not full.startswith(prefix):
            continue
        tensor, chunk = _torch_slot(layer, full[len(prefix):])
        grad = tensor.grad if tensor.grad is not None else torch.zeros_like(tensor)
        grads[f"grad {full}"] = grad if chunk is None else grad.chunk(3)[chunk]
    return grads


def to_torch_mask(mask: torch.Tensor | None, B: int, h: int, n_q: int, n_k: int):
    """Our mask (True = may attend, broadcastable) as torch's (B*h, n_q, n_k), True = blocked."""
    if mask is None:
        return None
    return ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)


# ---------------------------------------------------------------- a functional model with switches


def _attention(query, key_value, p, prefix, h, mask):
    """Multi-head attention from primitives with our parameter names; returns the output."""
    B, n_q, d = query.shape
    n_k = key_value.shape[1]

    def heads(x, w, n):  # (B, n, d) -> (B, h, n, d // h)
        projected = F.linear(x, p[f"{prefix}{w}.weight"], p[f"{prefix}{w}.bias"])
        return projected.view(B, n, h, d // h).transpose(1, 2)

    q, k, v = heads(query, "w_q", n_q), heads(key_value, "w_k", n_k), heads(key_value, "w_v", n_k)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)  # (B, h, n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, n_q, d)
    return F.linear(out, p[f"{prefix}w_o.weight"], p[f"{prefix}w_o.bias"])


def _ffn(x, p, prefix, activation):
    act = F.relu if activation == "relu" else F.gelu
    hidden = act(F.linear(x, p[f"{prefix}ffn.linear1.weight"], p[f"{prefix}ffn.linear1.bias"]))
    return F.linear(hidden, p[f"{prefix}ffn.linear2.weight"], p[f"{prefix}ffn.linear2.bias"])


def _norm(x, p, name):
    return F.layer_norm(x, x.shape[-1:], p[f"{name}.weight"], p[f"{name}.bias"])


def _residual(x, sublayer, p, norm, norm_first):
    """Post-norm LN(x + f(x)) or pre-norm x + f(LN(x))."""
    if norm_first:
        return x + sublayer(_norm(x, p, norm))
    return _norm(x + sublayer(x), p, norm)


def functional_encoder_block(x, p, prefix, h, mask, activation, norm_first):
    x = _residual(x, lambda y: _attention(y, y, p, f"{prefix}self_attn.", h, mask), p,
                  f"{prefix}norm1", norm_first)
    return _residual(x, lambda y: _ffn(y, p, prefix, activation), p, f"{prefix}norm2", norm_first)


DECODER_SWITCHES = {
    "use_tgt_mask": True,     # False: self-attention ignores tgt_mask
    "use_memory_mask": True,  # False: cross-attention ignores memory_mask
    "cross_from": "memory",  # "x": keys and values of the cross-attention from x (no mask fits)
    "norm3": "norm3",      # "none": no norm around the FFN; "norm2": norm2 reused
    "norm_memory": False,  # True: pre-norm also normalises memory with norm2
    "cross_residual": True,  # False: no residual around the cross-attention
    "force_norm_first": None,  # True/False: ignore the case's norm_first
}


def functional_decoder_block(x, memory, p, prefix, h, tgt_mask, memory_mask, activation,
                             norm_first, **switch):
    """A DecoderBlock from primitives; ``switch`` turns on one mistake (see DECODER_SWITCHES)."""
    s = {**DECODER_SWITCHES, **switch}
    norm_first = norm_first if s["force_norm_first"] is None else s["force_norm_first"]
    self_mask = tgt_mask if s["use_tgt_mask"] else None
    x = _residual(x, lambda y: _attention(y, y, p, f"{prefix}self_attn.", h, self_mask), p,
                  f"{prefix}norm1", norm_first)

    def cross(y):
        if s["cross_from"] == "x":
            return _attention(y, y, p, f"{prefix}cross_attn.", h, None)
        source = _norm(memory, p, f"{prefix}norm2") if s["norm_memory"] and norm_first else memory
        return _attention(y, source, p, f"{prefix}cross_attn.", h,
                          memory_mask if s["use_memory_mask"] else None)

    if s["cross_residual"]:
        x = _residual(x, cross, p, f"{prefix}norm2", norm_first)
    else:
        x = cross(_norm(x, p, f"{prefix}norm2")) if norm_first else _norm(cross(x), p, f"{prefix}norm2")
    if s["norm3"] == "none":
        return x + _ffn(x, p, prefix, activation)
    return _residual(x, lambda y: _ffn(y, p, prefix, activation), p, f"{prefix}{s['norm3']}",
                     norm_first)


# ---------------------------------------------------------------- DecoderBlock

# B, n_tgt, n_src, d_model, h, d_ff: every dimension differs.
DIMS = (2, 4, 5, 12, 3, 10)
DECODER_CASES = [
    Case("post-norm, no masks", 720, {"mask": "none", "memory_mask": False}),
    Case("post-norm, causal target mask", 721, {"mask": "causal", "memory_mask": False}),
    Case("post-norm, causal mask and source padding", 722, {"mask": "causal", "memory_mask": True}),
    Case("pre-norm, causal mask and source padding", 723,
         {"mask": "causal", "memory_mask": True, "norm_first": True}),
    Case("pre-norm, GELU, target padding too", 724,
         {"mask": "causal+padding", "memory_mask": True, "norm_first": True, "activation": "gelu"}),
    Case("post-norm, GELU, source padding only", 725,
         {"mask": "none", "memory_mask": True, "activation": "gelu"}),
    Case("dropout=0.1 in eval() mode", 726, {"mask": "causal", "memory_mask": True, "dropout": 0.1}),
    Case("float32, pre-norm", 727, {"mask": "causal", "memory_mask": True, "norm_first": True},
         dtype=torch.float32),
    Case("float32, post-norm", 728, {"mask": "causal", "memory_mask": True}, dtype=torch.float32),
]

DECODER_HOW = ("Create self.self_attn and self.cross_attn = MultiHeadAttention(d_model, num_heads), "
               "self.ffn = FeedForward(d_model, d_ff, activation, dropout) and self.norm1, "
               "self.norm2, self.norm3 = nn.LayerNorm(d_model), in that order; no other parameters.")


def _lengths_mask(B: int, n: int, g: torch.Generator, device) -> torch.Tensor:
    """(B, 1, 1, n): the first row is padded by 2, the others by 0 to 2; never fully padded."""
    lengths = torch.randint(n - 2, n + 1, (B,), generator=g)
    lengths[0] = n - 2
    return (torch.arange(n) < lengths[:, None])[:, None, None, :].to(device)


def decoder_inputs(case: Case, device):
    """x, memory (leaves), tgt_mask, memory_mask and the seeded parameters of a case."""
    B, n_t, n_s, d, h, d_ff = DIMS
    g = generator(case.seed)
    x = randn((B, n_t, d), g, case.dtype, device).requires_grad_()
    memory = randn((B, n_s, d), g, case.dtype, device).requires_grad_()
    kind = case.params["mask"]
    tgt_mask = None
    if kind != "none":
        tgt_mask = torch.ones(n_t, n_t, dtype=torch.bool, device=device).tril()
        if kind == "causal+padding":
            tgt_mask = _lengths_mask(B, n_t, g, device) & tgt_mask  # (B, 1, n_t, n_t)
    memory_mask = _lengths_mask(B, n_s, g, device) if case.params["memory_mask"] else None
    params = seeded_parameters(block_shapes(d, d_ff, decoder=True), case, device)
    return x, memory, tgt_mask, memory_mask, params


def _decoder_options(case: Case) -> dict:
    return {"activation": case.params.get("activation", "relu"),
            "norm_first": case.params.get("norm_first", False)}


def _functional_decoder_outputs(case, device, **switch) -> Outputs:
    B, n_t, n_s, d, h, d_ff = DIMS
    x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
    leaves = {"x": x, "memory": memory, **{k: v.requires_grad_() for k, v in p.items()}}
    o = _decoder_options(case)

    def call():
        return (functional_decoder_block(x, memory, p, "", h, tgt_mask, memory_mask,
                                         o["activation"], o["norm_first"], **switch),)

    return forward_backward(call, ("output",), leaves, case.seed)


def _decoder_mistake(description, hint, **switch):
    return Mistake(description, hint, lambda c, d: _functional_decoder_outputs(c, d, **switch))


DECODER_MISTAKES = {
    "cross_from_x": _decoder_mistake(
        "cross-attention whose keys and values come from x instead of memory",
        "Cross-attention reads the source: self.cross_attn(x, memory, memory, memory_mask), "
        "queries from the decoder, keys and values from the encoder's output.",
        cross_from="x"),
    "no_norm3": _decoder_mistake(
        "a missing third LayerNorm around the feed-forward network",
        "Each of the three sublayers has its own LayerNorm: norm1 with the self-attention, "
        "norm2 with the cross-attention, norm3 with the feed-forward network.", norm3="none"),
    "norm2_twice": _decoder_mistake(
        "norm2 used for the feed-forward sublayer too (norm3 unused)",
        "The feed-forward sublayer uses self.norm3.", norm3="norm2"),
    "no_tgt_mask": _decoder_mistake(
        "self-attention without tgt_mask",
        "Pass tgt_mask to the self-attention, or every target token sees the future.",
        use_tgt_mask=False),
    "no_memory_mask": _decoder_mistake(
        "cross-attention without memory_mask",
        "Pass memory_mask to the cross-attention, or the decoder attends to source padding.",
        use_memory_mask=False),
    "norm_memory": _decoder_mistake(
        "pre-norm that also normalises memory with norm2",
        "In pre-norm only the decoder's stream is normalised: "
        "self.cross_attn(self.norm2(x), memory, memory, memory_mask).", norm_memory=True),
    "no_cross_residual": _decoder_mistake(
        "a cross-attention sublayer without its residual connection",
        "Add the cross-attention's output to x: x + cross_attn(...) (post-norm: inside norm2).",
        cross_residual=False),
    "always_post": _decoder_mistake(
        "post-norm although norm_first=True",
        "With norm_first=True each sublayer is x = x + sublayer(norm(x)).", force_norm_first=False),
    "always_pre": _decoder_mistake(
        "pre-norm although norm_first=False",
        "With norm_first=False each sublayer is x = norm(x + sublayer(x)).", force_norm_first=True),
}


SHAPE_HINT = ("Check the shapes: x is (B, n_tgt, d_model) and memory (B, n_src, d_model); the "
              "queries of both attentions come from x, the cross-attention's keys and values "
              "from memory, and the output has the shape of x.")


class DecoderBlockModule(Exercise):
    name = "DecoderBlock"
    reference_name = "nn.TransformerDecoderLayer"
    forbidden = FORBIDDEN
    mistakes = DECODER_MISTAKES

    def cases(self):
        return DECODER_CASES

    def run(self, impl, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        o = _decoder_options(case)
        block = build_module(self.name, self.forbidden, case, impl, d, h, d_ff,
                             dropout=case.params.get("dropout", 0.0), **o)
        block.to(device).eval()
        x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
        params = load_parameters(block, p, self.name, DECODER_HOW)

        def call():
            try:
                out = call_learner(self.name, self.forbidden, case, block, x, memory,
                                   tgt_mask=tgt_mask, memory_mask=memory_mask)
            except CheckFailure as failure:
                if "must match the size" not in str(failure):
                    raise
                raise CheckFailure(f"{failure} {SHAPE_HINT}") from None
            return (expect_tensor(out, "DecoderBlock's output", case),)

        return forward_backward(call, ("output",), {"x": x, "memory": memory, **params}, case.seed)

    def reference(self, case, device):
        B, n_t, n_s, d, h, d_ff = DIMS
        o = _decoder_options(case)
        x, memory, tgt_mask, memory_mask, p = decoder_inputs(case, device)
        layer = nn.TransformerDecoderLayer(d, h, d_ff, dropout=case.params.get("dropout", 0.0),
                                           activation=o["activation"], batch_first=True,
                                           norm_first=o["norm_first"]).to(device, case.dtype).eval()
        copy_into_torch_layer(layer, p)

        def call():
            return (layer(x, memory, tgt_mask=to_torch_mask(tgt_mask, B, h, n_t, n_t),
                          memory_mask=to_torch_mask(memory_mask, B, h, n_t, n_s)),)

        outputs = forward_backward(call, ("output",), {"x": x, "memory": memory}, case.seed)
        return {**outputs, **torch_layer_grads(layer, p)}

    def evaluate(self, case, got, device):
        want = (DIMS[0], DIMS[1], DIMS[3])
        if tuple(got["output"].shape) != want:
            raise CheckFailure(
                f"DecoderBlock's output should have the shape of x, {want} = (B, n_tgt, d_model), "
                f"in {case}, but has {tuple(got['output'].shape)}. {SHAPE_HINT}")
        super().evaluate(case, got, device)

    def extra_checks(self, impl, device):
        def on(dev):
            block = impl(8, 2, 6).to(dev)
            x, memory = torch.zeros(2, 3, 8, device=dev), torch.zeros(2, 5, 8, device=dev)
            block(x, memory, tgt_mask=torch.ones(3, 3, dtype=torch.bool, device=dev).tril(),
                  memory_mask=torch.ones(2, 1, 1, 5, dtype=torch.bool, device=dev))

        check_device_independence(self.name, on)


# ---------------------------------------------------------------- Transformer

# B, n_src, n_tgt, d_model, h, d_ff, src vocabulary, tgt vocabulary: every dimension differs.
MODEL_DIMS = (2, 6, 5, 12, 3, 10, 11, 13)
MAX_LEN = 16
TRANSFORMER_CASES = [
    Case("post-norm, 1 encoder and 1 decoder block, no padding", 730,
         {"layers": (1, 1), "padded": False}),
    Case("post-norm, 2 + 2 blocks, source padding", 731, {"layers": (2, 2)}),
    Case("pre-norm (with the final LayerNorms), 2 + 2 blocks", 732,
         {"layers": (2, 2), "norm_first": True}),
    Case("pre-norm, GELU, 1 encoder and 2 decoder blocks", 733,
         {"layers": (1, 2), "norm_first": True, "activation": "gelu"}),
    Case("pad_id=3, 2 encoder blocks and 1 decoder block", 734, {"layers": (2, 1), "pad": 3}),
    Case("float32, post-norm, 1 + 1 blocks", 735, {"layers": (1, 1)}, dtype=torch.float32),
]

TRANSFORMER_HOW = (
    "Follow the notebook's layout: self.src_embed, self.tgt_embed = nn.Embedding(vocab, d_model); "
    "self.pos_encoding = PositionalEncoding(d_model, max_len, dropout); self.encoder_layers and "
    "self.decoder_layers = nn.ModuleList of TransformerBlock / DecoderBlock; self.encoder_norm and "
    "self.decoder_norm = nn.LayerNorm(d_model) when norm_first=True, nn.Identity() otherwise "
    "(a post-norm block already ends with a LayerNorm); self.out = nn.Linear(d_model, "
    "tgt_vocab_size).")


def _options(case: Case) -> dict:
    return {"activation": case.params.get("activation", "relu"),
            "norm_first": case.params.get("norm_first", False), "pad": case.params.get("pad", 0)}


def transformer_shapes(case: Case) -> dict[str, tuple[int, ...]]:
    """Parameter names and shapes of the notebook's Transformer for a case."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    n_enc, n_dec = case.params["layers"]
    shapes: dict[str, tuple[int, ...]] = {"src_embed.weight": (v_s, d), "tgt_embed.weight": (v_t, d)}
    for i in range(n_enc):
        shapes.update({f"encoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff, False).items()})
    for i in range(n_dec):
        shapes.update({f"decoder_layers.{i}.{k}": s for k, s in block_shapes(d, d_ff, True).items()})
    if _options(case)["norm_first"]:
        for norm in ("encoder_norm", "decoder_norm"):
            shapes.update({f"{norm}.weight": (d,), f"{norm}.bias": (d,)})
    shapes.update({"out.weight": (v_t, d), "out.bias": (v_t,)})
    return shapes


def _token_ids(shape, vocab: int, pad: int, g: torch.Generator) -> torch.Tensor:
    """Random ids in [0, vocab) that are never pad."""
    ids = torch.randint(0, vocab - 1, shape, generator=g)
    return ids + (ids >= pad).long()


def transformer_inputs(case: Case, device):
    """src (B, n_src) with padding at the end of row 0 (and maybe 1), tgt (B, n_tgt), parameters."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    pad = _options(case)["pad"]
    g = generator(case.seed)
    src = _token_ids((B, n_s), v_s, pad, g)
    if case.params.get("padded", True):
        keep = _lengths_mask(B, n_s, g, "cpu")[:, 0, 0, :]  # (B, n_src)
        src = src.masked_fill(~keep, pad)
    tgt = _token_ids((B, n_t), v_t, pad, g)
    params = seeded_parameters(transformer_shapes(case), case, device)
    return src.to(device), tgt.to(device), params


def _src_mask(src: torch.Tensor, pad: int) -> torch.Tensor:
    return (src != pad)[:, None, None, :]  # (B, 1, 1, n_src)


TRANSFORMER_SWITCHES = {
    "tgt_mask": "causal", "encoder_padding": True, "cross_padding": True, "final_norm": True,
    "emb_scale": False, "src_positions": True, "tgt_positions": True,
}


def functional_transformer(src, tgt, p, case: Case, **switch):
    """The notebook's Transformer from primitives: (memory, logits); ``switch``: one mistake."""
    s = {**TRANSFORMER_SWITCHES, **switch}
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    o = _options(case)
    pe = sinusoidal_table(MAX_LEN, d, p["out.weight"].dtype, src.device)
    scale = math.sqrt(d) if s["emb_scale"] else 1.0
    keep = _src_mask(src, o["pad"])
    x = F.embedding(src, p["src_embed.weight"]) * scale + (pe[:n_s] if s["src_positions"] else 0)
    for i in range(case.params["layers"][0]):
        x = functional_encoder_block(x, p, f"encoder_layers.{i}.", h,
                                     keep if s["encoder_padding"] else None, o["activation"],
                                     o["norm_first"])
    final = o["norm_first"] and s["final_norm"]
    memory = _norm(x, p, "encoder_norm") if final else x
    ones = torch.ones(n_t, n_t, dtype=torch.bool, device=src.device)
    tgt_mask = {"causal": ones.tril(), "upper": ones.triu(), "none": None}[s["tgt_mask"]]
    y = F.embedding(tgt, p["tgt_embed.weight"]) * scale + (pe[:n_t] if s["tgt_positions"] else 0)
    for i in range(case.params["layers"][1]):
        y = functional_decoder_block(y, memory, p, f"decoder_layers.{i}.", h,
                                     tgt_mask,
                                     keep if s["cross_padding"] else None, o["activation"],
                                     o["norm_first"])
    y = _norm(y, p, "decoder_norm") if final else y
    return memory, F.linear(y, p["out.weight"], p["out.bias"])


def _masked_memory(memory: torch.Tensor, src: torch.Tensor, pad: int) -> torch.Tensor:
    """Memory at real source positions only (what sits at padding is never read)."""
    return memory * (src != pad)[..., None].to(memory.dtype)


MODEL_NAMES = ("memory", "logits")


def _functional_transformer_outputs(case, device, **switch) -> Outputs:
    src, tgt, p = transformer_inputs(case, device)
    leaves = {k: v.requires_grad_() for k, v in p.items()}

    def call():
        memory, logits = functional_transformer(src, tgt, p, case, **switch)
        return _masked_memory(memory, src, _options(case)["pad"]), logits

    return forward_backward(call, MODEL_NAMES, leaves, case.seed)


def _model_mistake(description, hint, **switch):
    return Mistake(description, hint, lambda c, d: _functional_transformer_outputs(c, d, **switch))


PADDING_HINT = ("Pass src_mask = padding_mask(src, pad_id) to every encoder block and, as "
                "memory_mask, to every decoder block.")

TRANSFORMER_MISTAKES = {
    "no_causal": _model_mistake(
        "a decoder without the causal mask",
        "In decode, build causal_mask(n_tgt, device=tgt.device) and pass it as tgt_mask to every "
        "DecoderBlock: while training, position i must not see target tokens after i.",
        tgt_mask="none"),
    "future_mask": _model_mistake(
        "a decoder whose mask shows each position the future instead of the past",
        "The decoder's mask is causal_mask(n_tgt): True on and below the diagonal (check that "
        "causal_mask passes its own test).", tgt_mask="upper"),
    "no_padding": _model_mistake("a model that ignores the source padding", PADDING_HINT,
                                 encoder_padding=False, cross_padding=False),
    "no_encoder_padding": _model_mistake("encoder blocks without the source padding mask",
                                         PADDING_HINT, encoder_padding=False),
    "no_cross_padding": _model_mistake("decoder blocks without the source padding mask (memory_mask)",
                                       PADDING_HINT, cross_padding=False),
    "no_final_norm": _model_mistake(
        "pre-norm stacks without their final LayerNorms",
        "With norm_first=True apply self.encoder_norm to the encoder's output and "
        "self.decoder_norm before self.out: a pre-norm residual stream is never normalised.",
        final_norm=False),
    "emb_scale": _model_mistake(
        "embeddings multiplied by sqrt(d_model)",
        "This notebook adds the positional encoding to the embeddings as they are: "
        "nn.Embedding starts with values of size 1 already.", emb_scale=True),
    "no_tgt_positions": _model_mistake(
        "target embeddings without the positional encoding",
        "Apply self.pos_encoding to the target embeddings too.", tgt_positions=False),
    "no_src_positions": _model_mistake(
        "source embeddings without the positional encoding",
        "Apply self.pos_encoding to the source embeddings too.", src_positions=False),
}


def _build_transformer(impl, case: Case, exercise: str, device):
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    o = _options(case)
    n_enc, n_dec = case.params["layers"]
    model = build_module(exercise, FORBIDDEN, case, impl, v_s, v_t, d_model=d, num_heads=h,
                         d_ff=d_ff, num_encoder_layers=n_enc, num_decoder_layers=n_dec,
                         dropout=0.0, activation=o["activation"], norm_first=o["norm_first"],
                         max_len=MAX_LEN, pad_id=o["pad"])
    return model.to(device).eval()


def _use_reference_positions(model: nn.Module, case: Case, device) -> None:
    """Give the model the float64 sinusoid, so 10.4's rounding does not count here."""
    pe = getattr(getattr(model, "pos_encoding", None), "pe", None)
    d = MODEL_DIMS[3]
    if not isinstance(pe, torch.Tensor) or pe.numel() != MAX_LEN * d:
        raise CheckFailure("Transformer needs self.pos_encoding = PositionalEncoding(d_model, max_len, "
                           f"dropout) with its (max_len, d_model) table in the buffer pe. {TRANSFORMER_HOW}")
    with torch.no_grad():
        pe.copy_(sinusoidal_table(MAX_LEN, d, case.dtype, device).view_as(pe))


class TransformerModel(Exercise):
    name = "Transformer"
    reference_name = "nn.TransformerEncoder and nn.TransformerDecoder"
    forbidden = FORBIDDEN
    mistakes = TRANSFORMER_MISTAKES

    def cases(self):
        return TRANSFORMER_CASES

    def run(self, impl, case, device):
        model = _build_transformer(impl, case, self.name, device)
        src, tgt, p = transformer_inputs(case, device)
        params = load_parameters(model, p, self.name, TRANSFORMER_HOW)
        _use_reference_positions(model, case, device)
        pad = _options(case)["pad"]
        src_mask = _src_mask(src, pad)

        def call():
            memory = expect_tensor(call_learner(self.name, self.forbidden, case, model.encode, src,
                                                src_mask), "Transformer.encode's result", case)
            logits = expect_tensor(call_learner(self.name, self.forbidden, case, model.decode, tgt,
                                                memory, src_mask), "Transformer.decode's result", case)
            return _masked_memory(memory, src, pad), logits

        outputs = forward_backward(call, MODEL_NAMES, params, case.seed)
        with torch.no_grad():
            whole = call_learner(self.name, self.forbidden, case, model, src, tgt)
        rtol, atol = tolerance(case.dtype, device)
        if not close(expect_tensor(whole, "Transformer's output", case), outputs["logits"], rtol, atol):
            raise CheckFailure(
                f"Transformer: model(src, tgt) differs from model.decode(tgt, model.encode(src, "
                f"src_mask), src_mask) with src_mask = padding_mask(src, pad_id={pad}) in {case}. "
                "forward should build padding_mask(src, self.pad_id) and run encode, then decode.")
        return outputs

    def reference(self, case, device):
        B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
        o = _options(case)
        n_enc, n_dec = case.params["layers"]
        src, tgt, p = transformer_inputs(case, device)
        layer_options = {"dim_feedforward": d_ff, "dropout": 0.0, "activation": o["activation"],
                         "batch_first": True, "norm_first": o["norm_first"]}
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, **layer_options), n_enc,
                                        enable_nested_tensor=False).to(device, case.dtype).eval()
        decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, **layer_options),
                                        n_dec).to(device, case.dtype).eval()
        layers = {f"encoder_layers.{i}.": layer for i, layer in enumerate(encoder.layers)}
        layers.update({f"decoder_layers.{i}.": layer for i, layer in enumerate(decoder.layers)})
        for prefix, layer in layers.items():
            copy_into_torch_layer(layer, p, prefix)
        own = {k: v.requires_grad_() for k, v in p.items()  # embeddings, final norms, out
               if not k.startswith(("encoder_layers.", "decoder_layers."))}
        pe = sinusoidal_table(MAX_LEN, d, case.dtype, device)
        blocked = src == o["pad"]  # torch's key padding mask: True = ignore
        causal = torch.ones(n_t, n_t, dtype=torch.bool, device=device).triu(1)  # True = future

        def call():
            memory = encoder(F.embedding(src, p["src_embed.weight"]) + pe[:n_s],
                             src_key_padding_mask=blocked)
            if o["norm_first"]:
                memory = _norm(memory, p, "encoder_norm")
            y = decoder(F.embedding(tgt, p["tgt_embed.weight"]) + pe[:n_t], memory, tgt_mask=causal,
                        memory_key_padding_mask=blocked)
            if o["norm_first"]:
                y = _norm(y, p, "decoder_norm")
            return _masked_memory(memory, src, o["pad"]), F.linear(y, p["out.weight"], p["out.bias"])

        outputs = forward_backward(call, MODEL_NAMES, own, case.seed)
        for prefix, layer in layers.items():
            outputs.update(torch_layer_grads(layer, p, prefix))
        return {k: outputs[k] for k in (*MODEL_NAMES, *(f"grad {n}" for n in p))}

    def extra_checks(self, impl, device):
        case = TRANSFORMER_CASES[1]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(case.seed)
            model = _build_transformer(impl, case, self.name, device)
        src, tgt, _ = transformer_inputs(case, device)
        self._check_causal(model, src, tgt, case)
        self._check_padding(model, src, tgt, case)

        def on(dev):
            meta_model = _build_transformer(impl, case, self.name, dev)
            meta_model(src.to(dev), tgt.to(dev))

        check_device_independence(self.name, on)

    def _logits(self, model, src, tgt, case):
        with torch.no_grad():
            return expect_tensor(call_learner(self.name, self.forbidden, case, model, src, tgt),
                                 "Transformer's output", case)

    def _check_causal(self, model, src, tgt, case):
        """Changing target tokens k.. never changes the logits at positions before k."""
        k = 2
        changed = tgt.clone()
        changed[:, k:] = (tgt[:, k:] + 1) % MODEL_DIMS[7]
        changed[:, k:] += changed[:, k:] == _options(case)["pad"]
        before, after = self._logits(model, src, tgt, case), self._logits(model, src, changed, case)
        if not close(after[:, :k], before[:, :k], *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                f"Transformer: changing the target tokens from position {k} on changed the logits "
                f"at positions 0..{k - 1}: the decoder sees the future. Build causal_mask(n_tgt, "
                "device=tgt.device) in decode and pass it as tgt_mask to every DecoderBlock.")

    def _check_padding(self, model, src, tgt, case):
        """Appending padding to the source never changes the logits."""
        pad = _options(case)["pad"]
        padded = torch.cat([src, torch.full((src.shape[0], 3), pad, device=src.device)], dim=1)
        before, after = self._logits(model, src, tgt, case), self._logits(model, padded, tgt, case)
        if not close(after, before, *tolerance(case.dtype, src.device)):
            raise CheckFailure(
                "Transformer: appending three padding tokens to the source changed the logits: the "
                f"padding leaks into the translation. {PADDING_HINT}")


# ---------------------------------------------------------------- greedy_decode

OFF_SCRIPT = 15  # the stub's prediction after a prefix its script does not contain
STUB_VOCAB = 16

GREEDY_CASES = [
    Case("one sentence, <eos> after three words", 740,
         {"scripts": [[1, 7, 8, 9, 2]], "bos": 1, "eos": 2, "max_len": 10}),
    Case("three sentences of different lengths", 741,
         {"scripts": [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]], "bos": 1, "eos": 2,
          "max_len": 12}),
    Case("max_len reached before <eos>", 742,
         {"scripts": [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], "bos": 1, "eos": 2, "max_len": 5}),
    Case("bos_id=7, eos_id=4", 743, {"scripts": [[7, 5, 9, 5, 4], [7, 4]], "bos": 7, "eos": 4,
                                     "max_len": 8}),
    Case("an empty translation", 744, {"scripts": [[1, 2]], "bos": 1, "eos": 2, "max_len": 6}),
]


class ScriptedModel(nn.Module):
    """A stand-in for a trained Transformer with the notebook's interface.

    Sentence b of the batch has a script; after a decoder input that is a prefix of the
    script, the model predicts the script's next token, and ``OFF_SCRIPT`` after anything
    else. Its memory carries each sentence's key (the first source token), so the script
    follows the sentence whatever order or subset of rows greedy_decode runs.
    """

    def __init__(self, scripts: Mapping[int, list[int]], pad_id: int = 0):
        super().__init__()
        self.scripts = dict(scripts)
        self.pad_id = pad_id
        self.anchor = nn.Parameter(torch.zeros(1))  # a parameter, so the model has a device

    def encode(self, src, src_mask=None):
        return src[:, :, None].to(torch.float32).expand(-1, -1, 4)  # (B, n_src, 4)

    def decode(self, tgt, memory, src_mask=None):
        B, n = tgt.shape
        logits = torch.zeros(B, n, STUB_VOCAB, device=tgt.device)
        rows, keys = tgt.tolist(), memory[:, 0, 0].round().long().tolist()
        for b in range(B):
            script = self.scripts[keys[b]]
            for i in range(n):
                follows = i + 1 < len(script) and rows[b][: i + 1] == script[: i + 1]
                logits[b, i, script[i + 1] if follows else OFF_SCRIPT] = 1.0
        return logits

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


def _stub(case: Case, device):
    """The scripted model and its source batch: row b's first token is its key 10 + b."""
    scripts = {10 + b: s for b, s in enumerate(case.params["scripts"])}
    src = torch.tensor([[key, 5, 6, 7][: 4 - b % 2] + [0] * (b % 2) for b, key in
                        enumerate(scripts)], dtype=torch.long, device=device)  # (B, 4), odd rows padded
    return ScriptedModel(scripts).to(device), src


def _until_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """float64 copy with everything after each row's first eos (after position 0) set to -1."""
    out = tokens.detach().to("cpu", torch.float64).clone()
    for row in out:
        hits = (row[1:] == eos).nonzero()
        if len(hits):
            row[int(hits[0]) + 2:] = -1
    return out


class GreedyDecode(Exercise):
    name = "greedy_decode"
    reference_name = "the greedy choices of a scripted model"

    def cases(self):
        return GREEDY_CASES

    def run(self, impl, case, device):
        model, src = _stub(case, device)
        p = case.params
        out = call_learner(self.name, self.forbidden, case, impl, model, src, p["bos"], p["eos"],
                           p["max_len"])
        tokens = expect_tensor(out, "greedy_decode's result", case)
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise CheckFailure(f"greedy_decode should return token ids as a LongTensor, but returned "
                               f"dtype {tokens.dtype} in {case}: create the output with "
                               "dtype=torch.long (torch.full(..., bos_id, dtype=torch.long)).")
        if tokens.dim() != 2 or tokens.shape[0] != src.shape[0]:
            raise CheckFailure(f"greedy_decode should return shape (B, n) = ({src.shape[0]}, n), one "
                               f"row per source sentence, but returned {tuple(tokens.shape)} in {case}.")
        return {"tokens": _until_eos(tokens, p["eos"])}

    def reference(self, case, device):
        p = case.params
        rows = [s[: p["max_len"]] for s in p["scripts"]]
        n = max(len(r) for r in rows)
        return {"tokens": torch.tensor([r + [-1] * (n - len(r)) for r in rows], dtype=torch.float64)}

    def evaluate(self, case, got, device):
        p = case.params
        have, want = got["tokens"].to("cpu"), self.expected(case, device)["tokens"]
        B, n = have.shape
        if n == 0 or (have[:, 0] != p["bos"]).any():
            raise CheckFailure(f"greedy_decode should return sequences that start with bos_id="
                               f"{p['bos']} in {case}: start the output with a column of bos_id.")
        if n > p["max_len"]:
            raise CheckFailure(
                f"greedy_decode returned {n} tokens per sentence with max_len={p['max_len']} in "
                f"{case}: max_len counts every token, <bos> included. Stop when the output has "
                "max_len tokens.")
        m = min(n, want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong):
            b, i = (int(v) for v in wrong[0])
            raise CheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy choice "
                               f"in {case}. {self._diagnose(have[b], want[b], i)}")
        if n > want.shape[1]:
            raise CheckFailure(
                f"greedy_decode did not stop in {case}: every sentence had produced eos_id="
                f"{p['eos']} after {want.shape[1]} tokens, but the output has {n}. Stop as soon as "
                "every sentence in the batch has produced eos_id.")
        if n < want.shape[1]:
            raise CheckFailure(
                f"greedy_decode stopped after {n} tokens in {case}, before every sentence had "
                f"produced eos_id={p['eos']} (or max_len={p['max_len']} was reached). Keep going "
                "until all sentences of the batch are finished.")

    @staticmethod
    def _diagnose(have: torch.Tensor, want: torch.Tensor, i: int) -> str:
        """What the learner's row says about the loop, from the first wrong token i."""
        generated = have[1:i + 1]
        if len(generated) > 1 and (generated == want[1]).all():
            return ("It keeps predicting the same token: at each step feed everything generated "
                    "so far (starting with bos_id) to the decoder, take the logits at the last "
                    "position, [:, -1], and append their argmax.")
        if have[i] == OFF_SCRIPT:
            return ("The token does not follow from the tokens before it: at each step the decoder "
                    "input must be the whole output so far, bos_id first, and the next token is "
                    "the argmax of the logits at its last position.")
        return "Take the argmax over the vocabulary (dim=-1) of the logits at the last position."


# ---------------------------------------------------------------- the notebook's Transformer, for decoding


class _Attention(nn.Module):
    """MultiHeadAttention with the notebook's names; returns (output, weights)."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, n_q, d = query.shape  # batch, queries, d_model

        def heads(x):  # (B, n, d) -> (B, h, n, d // h)
            return x.view(B, -1, self.num_heads, d // self.num_heads).transpose(1, 2)

        q, k, v = heads(self.w_q(query)), heads(self.w_k(key)), heads(self.w_v(value))
        weights = attention_weights(q, k, mask)  # (B, h, n_q, n_k)
        return self.w_o((weights @ v).transpose(1, 2).reshape(B, n_q, d)), weights


class _FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.activation = nn.ReLU() if activation == "relu" else nn.GELU()

    def forward(self, x):
        return self.linear2(self.activation(self.linear1(x)))


class _Block(nn.Module):
    """TransformerBlock (``decoder=False``) or DecoderBlock, with the notebook's names."""

    def __init__(self, d_model: int, h: int, d_ff: int, activation: str, norm_first: bool, decoder: bool):
        super().__init__()
        self.self_attn = _Attention(d_model, h)
        if decoder:
            self.cross_attn = _Attention(d_model, h)
        self.ffn = _FeedForward(d_model, d_ff, activation)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        if decoder:
            self.norm3 = nn.LayerNorm(d_model)
        self.norm_first = norm_first

    def forward(self, x, memory=None, tgt_mask=None, memory_mask=None, mask=None):
        sublayers = [(lambda y: self.self_attn(y, y, y, tgt_mask if mask is None else mask)[0], self.norm1)]
        if hasattr(self, "cross_attn"):
            sublayers.append((lambda y: self.cross_attn(y, memory, memory, memory_mask)[0], self.norm2))
        sublayers.append((self.ffn, self.norm3 if hasattr(self, "norm3") else self.norm2))
        for sublayer, norm in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class _Positions(nn.Module):
    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model, torch.float32, "cpu"))

    def forward(self, x):
        return x + self.pe[: x.shape[1]]


class NotebookTransformer(nn.Module):
    """The notebook's Transformer, built by the check: the attribute names of the notebook's
    table, and every block's ``self_attn``, ``cross_attn`` (``w_q`` ... ``w_o``, ``num_heads``),
    ``ffn``, ``norm1`` .. ``norm3`` and ``norm_first``. Decoding exercises run on it."""

    def __init__(self, case: Case):
        super().__init__()
        B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
        o = _options(case)
        n_enc, n_dec = case.params["layers"]
        self.pad_id = o["pad"]
        self.src_embed, self.tgt_embed = nn.Embedding(v_s, d), nn.Embedding(v_t, d)
        self.pos_encoding = _Positions(d, DECODE_MAX_LEN)
        block = (d, h, d_ff, o["activation"], o["norm_first"])
        self.encoder_layers = nn.ModuleList(_Block(*block, decoder=False) for _ in range(n_enc))
        self.decoder_layers = nn.ModuleList(_Block(*block, decoder=True) for _ in range(n_dec))
        self.encoder_norm = nn.LayerNorm(d) if o["norm_first"] else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if o["norm_first"] else nn.Identity()
        self.out = nn.Linear(d, v_t)

    def encode(self, src, src_mask):
        x = self.pos_encoding(self.src_embed(src))
        for block in self.encoder_layers:
            x = block(x, mask=src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt, memory, src_mask):
        n = tgt.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt.device).tril()
        x = self.pos_encoding(self.tgt_embed(tgt))
        for block in self.decoder_layers:
            x = block(x, memory, causal, src_mask)
        return self.out(self.decoder_norm(x))

    def forward(self, src, tgt):
        src_mask = _src_mask(src, self.pad_id)
        return self.decode(tgt, self.encode(src, src_mask), src_mask)


DECODE_MAX_LEN = 32


_MODELS: dict[tuple[str, str], NotebookTransformer] = {}  # built once per case and device


def decoding_model(case: Case, device) -> NotebookTransformer:
    """A fresh copy of the case's model (see :func:`_decoding_model`)."""
    key = (case.name, str(device))
    if key not in _MODELS:
        _MODELS[key] = _decoding_model(case, device)
    return copy.deepcopy(_MODELS[key])


def _decoding_model(case: Case, device) -> NotebookTransformer:
    """The case's model with seeded weights, in the case's dtype, in eval mode. ``confident``
    models keep their LayerNorms as initialised and have larger embeddings and a sharper
    output layer: their greedy translations change from step to step and with the source, as
    a trained model's do, where a plain random model tends to repeat one token."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(case.seed)
        model = NotebookTransformer(case)
    values = seeded_parameters(transformer_shapes(case), case, torch.device("cpu"))
    if case.params.get("confident"):  # LayerNorms as initialised, a sharper output layer
        for name in values:
            if "norm" in name:
                values[name] = torch.ones_like(values[name]) if name.endswith("weight") else \
                    torch.zeros_like(values[name])
            elif "embed" in name:
                values[name] = values[name] * 2
        values["out.weight"], values["out.bias"] = values["out.weight"] * 3, values["out.bias"] * 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(values[name])
    return model.to(device, case.dtype).eval()


def decoding_source(case: Case, device) -> torch.Tensor:
    """(B, n_src) ids of the case, never pad, with row b cut short by ``short[b]`` pads."""
    B, n = len(case.params["short"]), case.params["n_src"]
    pad = _options(case)["pad"]
    src = _token_ids((B, n), MODEL_DIMS[6], pad, generator(case.seed + 1))
    for b, short in enumerate(case.params["short"]):
        if short:
            src[b, n - short:] = pad
    return src.to(device)


def reference_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int):
    """greedy_decode as the notebook's solution writes it: (ids (B, n), smallest top-2 margin)."""
    with torch.no_grad():
        return _reference_greedy(model, src, bos, eos, max_len)


def _reference_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int):
    src_mask = _src_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    margin = math.inf
    while ys.shape[1] < max_len and not finished.all():
        logits = model.decode(ys, memory, src_mask)[:, -1]  # (B, vocab)
        top = logits.topk(2, dim=-1).values
        margin = min(margin, float((top[:, 0] - top[:, 1])[~finished].min()))
        word = logits.argmax(dim=-1).masked_fill(finished, eos)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos
    return ys, margin


# ---------------------------------------------------------------- greedy_decode_cached


def _split(linear: nn.Module, x: torch.Tensor, h: int) -> torch.Tensor:
    B, n, d = x.shape
    return linear(x).view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d // h)


def _attend(attention: nn.Module, x, k, v, mask) -> torch.Tensor:
    """The queries of x (B, n, d) against given keys and values (B, h, n_k, d // h)."""
    q = _split(attention.w_q, x, attention.num_heads)
    out = attention_weights(q, k, mask) @ v  # (B, h, n, d // h)
    B, h, n, d_h = out.shape
    return attention.w_o(out.transpose(1, 2).reshape(B, n, h * d_h))


CACHE_SWITCHES = {
    "position": "newest",  # "zero": every new token at position 0; "next": one position too far
    "self_cache": True,  # False: the newest position attends to itself only
    "memory_mask": True,  # False: cross-attention ignores the source padding
    "decoder_norm": True,  # False: decoder_norm skipped before out
    "norm_first": None,  # False: post-norm whatever the block says
    "shared_cache": False,  # True: one cache for all decoder blocks
}


def cached_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                  **switch) -> torch.Tensor:
    """Greedy decoding with cached keys and values on the notebook's layout; ``switch`` turns on
    one known mistake (:data:`CACHE_SWITCHES`)."""
    with torch.no_grad():
        return _cached_greedy(model, src, bos, eos, max_len, **switch)


def _cached_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                   **switch) -> torch.Tensor:
    s = {**CACHE_SWITCHES, **switch}
    src_mask = _src_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    blocks = list(model.decoder_layers)
    cross = [(_split(b.cross_attn.w_k, memory, b.cross_attn.num_heads),
              _split(b.cross_attn.w_v, memory, b.cross_attn.num_heads)) for b in blocks]
    shared: dict = {"k": [], "v": []}
    caches = [shared if s["shared_cache"] else {"k": [], "v": []} for _ in blocks]
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    while ys.shape[1] < max_len and not finished.all():
        t = ys.shape[1] - 1  # position of the newest token
        position = {"newest": t, "zero": 0, "next": t + 1}[s["position"]]
        x = model.tgt_embed(ys[:, -1:]) + model.pos_encoding.pe[position]  # (B, 1, d)
        for block, (cross_k, cross_v), cache in zip(blocks, cross, caches):
            h = block.self_attn.num_heads

            def self_attention(y, block=block, cache=cache, h=h):
                k, v = _split(block.self_attn.w_k, y, h), _split(block.self_attn.w_v, y, h)
                if s["self_cache"]:
                    cache["k"].append(k)
                    cache["v"].append(v)
                    k, v = torch.cat(cache["k"], dim=2), torch.cat(cache["v"], dim=2)
                return _attend(block.self_attn, y, k, v, None)

            def cross_attention(y, block=block, k=cross_k, v=cross_v):
                return _attend(block.cross_attn, y, k, v, src_mask if s["memory_mask"] else None)

            norm_first = block.norm_first if s["norm_first"] is None else s["norm_first"]
            for sublayer, norm in ((self_attention, block.norm1), (cross_attention, block.norm2),
                                   (block.ffn, block.norm3)):
                x = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
        y = model.decoder_norm(x) if s["decoder_norm"] else x
        word = model.out(y)[:, -1].argmax(dim=-1).masked_fill(finished, eos)  # (B,)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos
    return ys


class LayerCounter:
    """Forward hooks on a model's layers: positions per call, cross-attention projections,
    encoder runs. One position of one sentence is one row of a layer's input."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.most_rows = 0  # the most rows one call of a decoder layer processed
        self.cross_rows: dict[str, int] = {}  # rows through each block's cross w_k and w_v
        self.encoder_calls: dict[int, int] = {}
        self.handles: list = []

    def __enter__(self) -> LayerCounter:
        for i, block in enumerate(self.model.decoder_layers):
            for name, module in block.named_modules():
                if name in ("cross_attn.w_k", "cross_attn.w_v"):
                    self._hook(module, self._cross(f"{i}.{name}"))
                elif isinstance(module, (nn.Linear, nn.LayerNorm)):
                    self._hook(module, self._rows)
        for i, block in enumerate(self.model.encoder_layers):
            self._hook(block, self._encoder(i))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()

    def _hook(self, module: nn.Module, fn) -> None:
        self.handles.append(module.register_forward_hook(fn))

    @staticmethod
    def _count(inputs) -> int:
        x = inputs[0]
        return x.numel() // x.shape[-1] if x.dim() else 1

    def _rows(self, module, inputs, output) -> None:
        self.most_rows = max(self.most_rows, self._count(inputs))

    def _cross(self, name: str):
        def hook(module, inputs, output):
            self.cross_rows[name] = self.cross_rows.get(name, 0) + self._count(inputs)
        return hook

    def _encoder(self, i: int):
        def hook(module, inputs, output):
            self.encoder_calls[i] = self.encoder_calls.get(i, 0) + 1
        return hook

    def outputs(self) -> Outputs:
        return {"most positions in one call": torch.tensor(float(self.most_rows), dtype=torch.float64),
                "cross-attention rows": torch.tensor(float(max(self.cross_rows.values(), default=0)),
                                                     dtype=torch.float64),
                "encoder runs": torch.tensor(float(max(self.encoder_calls.values(), default=0)),
                                             dtype=torch.float64)}


# B sentences (short[b] pads at the end of row b), n_src, bos, eos, max_len; every dimension
# of the model is MODEL_DIMS'. eos ids are chosen so that the sentences end at different steps.
CACHED_CASES = [
    Case("post-norm, 1 + 1 blocks, one sentence", 772,
         {"layers": (1, 1), "short": [0], "n_src": 5, "bos": 1, "eos": 6, "max_len": 8}),
    Case("post-norm, 2 + 2 blocks, 3 sentences with padding", 801,
         {"layers": (2, 2), "short": [0, 2, 1], "n_src": 6, "bos": 1, "eos": 3, "max_len": 10,
          "confident": True}),
    Case("pre-norm, 2 + 2 blocks, 4 sentences with padding", 796,
         {"layers": (2, 2), "norm_first": True, "short": [1, 0, 3, 2], "n_src": 6, "bos": 1, "eos": 6,
          "max_len": 10, "confident": True}),
    Case("pre-norm, GELU, 1 + 2 blocks, max_len reached", 773,
         {"layers": (1, 2), "norm_first": True, "activation": "gelu", "short": [0, 2], "n_src": 5,
          "bos": 1, "eos": 9, "max_len": 7, "confident": True}),
    Case("pad_id=3, bos_id=5, 2 + 1 blocks", 822,
         {"layers": (2, 1), "pad": 3, "short": [2, 0, 1], "n_src": 6, "bos": 5, "eos": 9,
          "max_len": 9, "confident": True}),
    Case("float32, post-norm, 2 + 2 blocks", 811,
         {"layers": (2, 2), "short": [0, 1, 2], "n_src": 6, "bos": 1, "eos": 12, "max_len": 9,
          "confident": True}, dtype=torch.float32),
]


def _cached_mistake(description: str, hint: str, **switch) -> Mistake:
    def run(case: Case, device) -> Outputs:
        p = case.params
        model, src = decoding_model(case, device), decoding_source(case, device)
        return {"tokens": _until_eos(cached_greedy(model, src, p["bos"], p["eos"], p["max_len"],
                                                   **switch), p["eos"])}
    return Mistake(description, hint, run)


NEWEST = ("The newest token is at position t = (tokens so far) - 1: add pe[t] (for example "
          "model.pos_encoding.pe[ys.shape[1] - 1]) to its embedding.")

CACHED_MISTAKES = {
    "position_zero": _cached_mistake("every new token embedded at position 0", NEWEST, position="zero"),
    "position_next": _cached_mistake("every new token embedded one position too far", NEWEST,
                                     position="next"),
    "no_self_cache": _cached_mistake(
        "self-attention that sees only the newest position",
        "Append the newest key and value to the block's cache, then let the newest query attend "
        "to all the cached keys: every earlier position, and itself.", self_cache=False),
    "shared_cache": _cached_mistake(
        "one cache shared by all decoder blocks",
        "Each decoder block has its own keys and values: keep one cache per block.", shared_cache=True),
    "no_memory_mask": _cached_mistake(
        "cross-attention without the source padding mask",
        "Pass src_mask (padding_mask(src, model.pad_id)) to every cross-attention, as decode does.",
        memory_mask=False),
    "no_decoder_norm": _cached_mistake(
        "decoder_norm skipped before the output layer",
        "Apply model.decoder_norm before model.out, as decode does (it is a LayerNorm when "
        "norm_first=True).", decoder_norm=False),
    "always_post": _cached_mistake(
        "post-norm sublayers although the blocks are pre-norm",
        "Follow block.norm_first: x + sublayer(norm(x)) when True, norm(x + sublayer(x)) when False.",
        norm_first=False),
}

CACHED_HOW = ("The check runs greedy_decode_cached on models of its own with the notebook's layout "
              "(model.encode, tgt_embed, pos_encoding.pe, decoder_layers with self_attn, cross_attn, "
              "ffn, norm1, norm2, norm3 and norm_first, decoder_norm, out, pad_id): keep your helpers "
              "as functions that take these parts, not as new methods of your classes.")


class GreedyDecodeCached(Exercise):
    name = "greedy_decode_cached"
    reference_name = "greedy decoding without a cache"
    mistakes = CACHED_MISTAKES

    def __init__(self):
        self._references: dict[tuple[str, str], torch.Tensor] = {}

    def cases(self):
        return CACHED_CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = decoding_model(case, device), decoding_source(case, device)
        with LayerCounter(model) as counter:
            try:
                out = call_learner(self.name, self.forbidden, case, impl, model, src, p["bos"], p["eos"],
                                   p["max_len"])
            except CheckFailure as failure:
                if "has no attribute" not in str(failure):
                    raise
                raise CheckFailure(f"{failure}\\n{CACHED_HOW}") from None
        tokens = expect_tensor(out, f"{self.name}'s result", case)
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise CheckFailure(f"{self.name} should return token ids (dtype=torch.long), but returned "
                               f"dtype {tokens.dtype} in {case}.")
        if tokens.dim() != 2 or tokens.shape[0] != src.shape[0]:
            raise CheckFailure(f"{self.name} should return shape (B, n) = ({src.shape[0]}, n), one row "
                               f"per source sentence, but returned {tuple(tokens.shape)} in {case}.")
        return {"tokens": _until_eos(tokens, p["eos"]), **counter.outputs()}

    def reference(self, case, device):
        key = (case.name, str(device))
        if key not in self._references:
            p = case.params
            model, src = decoding_model(case, device), decoding_source(case, device)
            ys, _ = reference_greedy(model, src, p["bos"], p["eos"], p["max_len"])
            self._references[key] = _until_eos(ys, p["eos"])
        return {"tokens": self._references[key].clone()}

    def evaluate(self, case, got, device):
        p = case.params
        have, want = got["tokens"].to("cpu"), self.reference(case, device)["tokens"]
        if have.shape != want.shape or not torch.equal(have, want):
            raise CheckFailure(self._wrong_ids(case, have, want, device))
        B, n_src = len(p["short"]), p["n_src"]
        runs = int(got["encoder runs"])
        if runs != 1:
            raise CheckFailure(
                f"{self.name} ran the encoder {runs} times in {case}: run model.encode(src, src_mask) "
                "once, before the loop, and keep its output (the memory).")
        rows = int(got["most positions in one call"])
        if rows == 0:
            raise CheckFailure(
                f"{self.name} never called the decoder blocks' layers in {case} (block.self_attn.w_q(...), "
                "block.ffn(...), block.norm1(...)): call them as modules, not through their weights. "
                "The check counts the positions each layer processes.")
        if rows > B:
            raise CheckFailure(
                f"{self.name}: one call of a decoder layer processed {rows} positions in {case}, a batch "
                f"of {B} sentences. After the first step each decoder block should process only the "
                "newest position of each sentence, its query, key and value, and read the keys and "
                "values of the earlier positions from its cache.")
        cross = int(got["cross-attention rows"])
        if cross > B * n_src:
            raise CheckFailure(
                f"{self.name} computed the cross-attention keys and values of the source "
                f"{cross // (B * n_src)} times in {case}: they depend only on the memory, so compute "
                "them once per block, before the loop (block.cross_attn.w_k(memory), "
                "block.cross_attn.w_v(memory)).")

    def _wrong_ids(self, case: Case, have: torch.Tensor, want: torch.Tensor, device) -> str:
        p = case.params
        if have.shape[1] == 0 or (have[:, 0] != p["bos"]).any():
            return (f"{self.name} should return sequences that start with bos_id={p['bos']} in {case}.")
        if have.shape[1] > p["max_len"]:
            return (f"{self.name} returned {have.shape[1]} tokens per sentence with max_len="
                    f"{p['max_len']} in {case}: max_len counts every token, <bos> included.")
        m = min(have.shape[1], want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong) == 0:
            return (f"{self.name} returned {have.shape[1]} tokens per sentence in {case}, greedy "
                    f"decoding {want.shape[1]}: stop when every sentence has produced eos_id="
                    f"{p['eos']} or the output has max_len tokens, as greedy_decode does.")
        b, i = (int(v) for v in wrong[0])
        message = (f"{self.name}: token {i} of sentence {b} differs from greedy_decode's in {case}; "
                   "the cached decoder must give exactly the same ids.")
        for mistake in self.mistakes.values():
            variant = mistake.run(case, device)["tokens"].to("cpu")
            if variant.shape == have.shape and torch.equal(variant, have):
                return f"{message}\nThis looks like {mistake.description}. {mistake.hint}"
        return message

    def extra_checks(self, impl, device):
        case = CACHED_CASES[0]
        p = case.params
        model = decoding_model(case, torch.device("cpu"))
        src = decoding_source(case, "cpu")
        check_unplaced_tensors(self.name, lambda: impl(model, src, p["bos"], p["eos"], p["max_len"]))


# ---------------------------------------------------------------- beam_search


class TableModel(nn.Module):
    """A scripted translator with the notebook's interface, for one sentence: the logits after
    a prefix (the tokens after <bos>) come from ``table``, or are drawn from the prefix itself.

    ``table`` maps a prefix (a tuple) to {token: probability}; the mass left over is spread
    over the other tokens. Prefixes not in the table get seeded random logits (``spread``
    wide). Every prefix's logits are shifted by a seeded constant: only log-softmax gives
    log-probabilities, raw logits do not.
    """

    def __init__(self, vocab: int, seed: int, table: Mapping | None = None, spread: float = 1.0,
                 damp: Mapping[int, float] | None = None, pad_id: int = 0):
        super().__init__()
        self.vocab, self.seed, self.table, self.spread = vocab, seed, dict(table or {}), spread
        self.damp = dict(damp or {})  # token -> logit added to the random logits (make it unlikely)
        self.pad_id = pad_id
        self.anchor = nn.Parameter(torch.zeros(1, dtype=torch.float64))  # the model's device

    def logits_for(self, prefix: tuple[int, ...]) -> torch.Tensor:
        """float64 logits (vocab,) for the next token after <bos> + prefix."""
        key = self.seed
        for token in prefix:
            key = (key * 1_000_003 + token + 1) % 2**61
        g = generator(key)
        shift = float(torch.rand((), generator=g, dtype=torch.float64)) * 6 - 3
        if prefix in self.table:
            given = self.table[prefix]
            rest = (1.0 - sum(given.values())) / max(1, self.vocab - len(given))
            probs = torch.tensor([given.get(w, rest * (1 + w / 100)) for w in range(self.vocab)],
                                 dtype=torch.float64)  # the rest a little uneven: no ties
            return probs.clamp_min(1e-12).log() + shift
        logits = torch.randn(self.vocab, generator=g, dtype=torch.float64) * self.spread + shift
        for token, amount in self.damp.items():
            logits[token] += amount
        return logits

    def encode(self, src, src_mask=None):
        return src[:, :, None].to(self.anchor.dtype).expand(-1, -1, 4)  # (B, n_src, 4), unused

    def decode(self, tgt, memory, src_mask=None):
        k, n = tgt.shape
        logits = torch.empty(k, n, self.vocab, dtype=torch.float64)
        for i, row in enumerate(tgt.tolist()):
            for j in range(n):
                logits[i, j] = self.logits_for(tuple(row[1: j + 1]))
        return logits.to(self.anchor.device)

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


BEAM_SWITCHES = {
    "width": None,  # 1: beam_size ignored (greedy)
    "raw_logits": False,  # scores summed from raw logits instead of log-softmax
    "finished_compete": False,  # finished hypotheses stay in the beam and take slots
    "no_refill": False,  # the beam shrinks by one for every finished hypothesis
    "drop_finished": False,  # finished hypotheses are thrown away
    "length_norm": False,  # hypotheses ranked by their mean log-probability per token
    "new_tokens": False,  # max_len counts the tokens after <bos>
}


def reference_beam(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                   beam_size: int, **switch) -> tuple[list[int], float]:
    """The contract's beam search (``switch``: one known mistake): (best ids, its score)."""
    with torch.no_grad():
        return _reference_beam(model, src, bos, eos, max_len, beam_size, **switch)


def _reference_beam(model, src, bos, eos, max_len, beam_size, **switch):
    s = {**BEAM_SWITCHES, **switch}
    width = s["width"] or beam_size
    src_mask = _src_mask(src, model.pad_id)
    memory = model.encode(src, src_mask)
    alive: list[tuple[list[int], float]] = [([bos], 0.0)]
    finished: list[tuple[list[int], float]] = []
    limit = max_len + 1 if s["new_tokens"] else max_len
    kept = alive

    def rank(hyp):  # what the search sorts by
        ids, score = hyp
        return score / (len(ids) - 1) if s["length_norm"] and len(ids) > 1 else score

    while alive and len(alive[0][0]) < limit:
        k = len(alive)
        ys = torch.tensor([ids for ids, _ in alive], dtype=torch.long, device=src.device)  # (k, t)
        logits = model.decode(ys, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))[:, -1]
        step = logits.double() if s["raw_logits"] else torch.log_softmax(logits.double(), dim=-1)
        candidates = [(ids + [w], score + float(step[i, w]))
                      for i, (ids, score) in enumerate(alive) for w in range(step.shape[-1])]
        if s["finished_compete"]:
            candidates += finished
            finished = []
        slots = width - len(finished) if s["no_refill"] else width
        kept = sorted(candidates, key=rank, reverse=True)[:max(slots, 0)]
        alive = [h for h in kept if h[0][-1] != eos]
        if not s["drop_finished"]:
            finished += [h for h in kept if h[0][-1] == eos]
        if finished and alive and max(map(rank, finished)) >= max(map(rank, alive)):
            break
    return max(finished + alive or kept, key=rank)  # (kept: all were dropped, with drop_finished)


def exhaustive_search(model: TableModel, bos: int, eos: int, max_len: int) -> tuple[list[int], float]:
    """The best hypothesis of all: every sequence that ends with eos, or has max_len tokens."""
    best: tuple[list[int], float] = ([bos], -math.inf)
    frontier = [([bos], 0.0)]
    while frontier:
        ids, score = frontier.pop()
        step = torch.log_softmax(model.logits_for(tuple(ids[1:])), dim=-1)
        for w in range(model.vocab):
            hyp = (ids + [w], score + float(step[w]))
            if w == eos or len(hyp[0]) == max_len:
                best = max(best, hyp, key=lambda h: h[1])
            else:
                frontier.append(hyp)
    return best


A, B_, C = 3, 4, 5  # word ids of the scripted tables (pad 0, bos 1, eos 2)
BEAM_CASES = [
    Case("greedy is wrong: <bos> a (0.5) leads nowhere, <bos> b (0.4) <eos> (0.9) wins", 780,
         {"vocab": 6, "table": {(): {A: 0.5, B_: 0.4, 2: 0.08}, (A,): {A: 0.31, C: 0.3, 2: 0.29},
                                (B_,): {2: 0.9}},
          "bos": 1, "eos": 2, "max_len": 6, "beam_size": 2}),
    Case("a sentence finished at the first step beats the beam that goes on", 781,
         {"vocab": 6, "table": {(): {2: 0.45, A: 0.5}, (A,): {A: 0.31, B_: 0.3, C: 0.29}},
          "bos": 1, "eos": 2, "max_len": 7, "beam_size": 2}),
    Case("the beam refills after <eos>: <bos> a b <eos> (0.30) beats <bos> <eos> (0.25)", 782,
         {"vocab": 6, "table": {(): {A: 0.66, 2: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, 2: 0.02},
                                (A, B_): {2: 0.95}, (A, C): {2: 0.1, A: 0.31, B_: 0.3, C: 0.29}},
          "bos": 1, "eos": 2, "max_len": 6, "beam_size": 2}),
    Case("random table, beam_size=2", 941, {"vocab": 6, "bos": 1, "eos": 2, "max_len": 7, "beam_size": 2}),
    Case("beam_size=1 is greedy", 783, {"vocab": 7, "bos": 1, "eos": 2, "max_len": 7, "beam_size": 1}),
    Case("as wide as every hypothesis: exhaustive search", 823,
         {"vocab": 5, "bos": 1, "eos": 2, "max_len": 4, "beam_size": 25, "exhaustive": True}),
    Case("<eos> unlikely: max_len reached", 785,
         {"vocab": 5, "damp": {2: -6.0}, "bos": 1, "eos": 2, "max_len": 5, "beam_size": 3}),
    Case("bos_id=4, eos_id=3, beam_size=4", 786, {"vocab": 8, "bos": 4, "eos": 3, "max_len": 6,
                                                  "beam_size": 4}),
    Case("a Transformer of the notebook's layout, beam_size=3", 787,
         {"model": "transformer", "layers": (2, 2), "short": [1], "n_src": 6, "bos": 1, "eos": 6,
          "max_len": 8, "beam_size": 3, "confident": True}),
]


def beam_model(case: Case, device) -> tuple[nn.Module, torch.Tensor]:
    """The case's model and its one-sentence source (1, n_src)."""
    p = case.params
    if p.get("model") == "transformer":
        return decoding_model(case, device), decoding_source(case, device)
    model = TableModel(p["vocab"], case.seed, p.get("table"), damp=p.get("damp")).to(device)
    return model, torch.tensor([[7, 5, 6]], device=device)


def _beam_outputs(ids, score: float) -> Outputs:
    return {"ids": torch.tensor([ids], dtype=torch.float64),
            "score": torch.tensor(score, dtype=torch.float64)}


def _beam_mistake(description: str, hint: str, **switch) -> Mistake:
    def run(case: Case, device) -> Outputs:
        p = case.params
        model, src = beam_model(case, device)
        return _beam_outputs(*reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"],
                                             **switch))
    return Mistake(description, hint, run)


CONTRACT = ("At each step extend every unfinished hypothesis by every token, keep the beam_size best "
            "extensions, and move those that end in eos_id to the finished set: the next step again "
            "keeps beam_size unfinished extensions.")

BEAM_MISTAKES = {  # the first that matches is named: the more specific ones first
    "finished_compete": _beam_mistake(
        "finished hypotheses kept in the beam, taking slots from the unfinished ones",
        CONTRACT, finished_compete=True),
    "length_norm": _beam_mistake(
        "hypotheses ranked by their mean log-probability per token (a length penalty)",
        "The contract ranks by the sum of the log-probabilities, with no length penalty.",
        length_norm=True),
    "no_refill": _beam_mistake(
        "a beam that shrinks by one for every finished hypothesis", CONTRACT, no_refill=True),
    "drop_finished": _beam_mistake(
        "finished hypotheses thrown away",
        "Keep every hypothesis that ends in eos_id in a finished set, and return the best of the "
        "finished and the unfinished ones.", drop_finished=True),
    "new_tokens": _beam_mistake(
        "max_len counted without <bos>",
        "Hypotheses stop at max_len tokens, bos_id included, as in greedy_decode.", new_tokens=True),
    "raw_logits": _beam_mistake(
        "hypotheses scored with the raw logits",
        "Logits are not log-probabilities: add torch.log_softmax(logits[:, -1], dim=-1) to each "
        "hypothesis' score.", raw_logits=True),
    "greedy": _beam_mistake("beam_size ignored: the greedy choice at every step",
                            "Keep the beam_size best extensions of all hypotheses, not one.", width=1),
}


class BeamSearch(Exercise):
    name = "beam_search"
    reference_name = "beam search as the contract defines it"
    mistakes = BEAM_MISTAKES

    def cases(self):
        return BEAM_CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = beam_model(case, device)
        result = call_learner(self.name, self.forbidden, case, impl, model, src, p["bos"], p["eos"],
                              p["max_len"], beam_size=p["beam_size"])
        if not isinstance(result, tuple) or len(result) != 2:
            raise CheckFailure(f"{self.name} should return a pair (ids, score), but returned "
                               f"{type(result).__name__} in {case}.")
        ids, score = result
        ids = expect_tensor(ids, f"{self.name}'s ids", case)
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise CheckFailure(f"{self.name} should return token ids (dtype=torch.long), not {ids.dtype}, "
                               f"in {case}.")
        if ids.dim() != 2 or ids.shape[0] != 1:
            raise CheckFailure(f"{self.name} should return ids of shape (1, n), one sentence, but "
                               f"returned shape {tuple(ids.shape)} in {case}.")
        try:
            value = float(score)
        except (TypeError, ValueError, RuntimeError):
            raise CheckFailure(f"{self.name}'s score should be a number (a float), but is a "
                               f"{type(score).__name__} in {case}.") from None
        return _beam_outputs(ids[0].tolist(), value)

    def reference(self, case, device):
        p = case.params
        model, src = beam_model(case, device)
        if p.get("exhaustive"):
            return _beam_outputs(*exhaustive_search(model, p["bos"], p["eos"], p["max_len"]))
        return _beam_outputs(*reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"]))

    def evaluate(self, case, got, device):
        p = case.params
        want = self.reference(case, device)
        ids, score = got["ids"].to("cpu"), float(got["score"])
        right_ids = ids.shape == want["ids"].shape and torch.equal(ids, want["ids"])
        right_score = close_score(score, float(want["score"]))
        if right_ids and right_score:
            return
        if ids.shape[1] == 0 or ids[0, 0] != p["bos"]:
            raise CheckFailure(f"{self.name} should return ids that start with bos_id={p['bos']} in {case}.")
        if ids.shape[1] > p["max_len"]:
            raise CheckFailure(f"{self.name} returned {ids.shape[1]} tokens with max_len={p['max_len']} in "
                               f"{case}: max_len counts every token, bos_id included.")
        if (ids[0, 1:-1] == p["eos"]).any():
            raise CheckFailure(f"{self.name} returned a hypothesis that goes on after eos_id={p['eos']} in "
                               f"{case}: a hypothesis that ends in eos_id is finished; it is not extended.")
        if right_ids:
            raise CheckFailure(
                f"{self.name} found the right sentence but its score is {score:.4g} instead of "
                f"{float(want['score']):.4g} in {case}: the score is the sum of the log-probabilities "
                "(log-softmax of the logits) of every token after bos_id." + self._score_hint(score, want))
        diagnosis = self._diagnose(case, ids, score, device)
        raise CheckFailure(f"{self.name} did not return the best hypothesis of the search in {case}."
                           + (f"\n{diagnosis}" if diagnosis else ""))

    @staticmethod
    def _score_hint(score: float, want: Outputs) -> str:
        if math.isclose(score, math.exp(float(want["score"])), rel_tol=1e-4, abs_tol=1e-6):
            return " It looks like a probability: return the sum of the log-probabilities instead."
        return ""

    def _diagnose(self, case: Case, ids: torch.Tensor, score: float, device) -> str | None:
        for mistake in self.mistakes.values():
            variant = mistake.run(case, device)
            if variant["ids"].shape == ids.shape and torch.equal(variant["ids"], ids):
                return f"This looks like {mistake.description}. {mistake.hint}"
        return None

    def extra_checks(self, impl, device):
        case = BEAM_CASES[0]
        p = case.params
        model, src = beam_model(case, torch.device("cpu"))
        check_unplaced_tensors(self.name, lambda: impl(model, src, p["bos"], p["eos"], p["max_len"],
                                                       beam_size=p["beam_size"]))


causal_mask = CausalMask()
padding_mask = PaddingMask()
decoder_block = DecoderBlockModule()
transformer = TransformerModel()
greedy_decode = GreedyDecode()
greedy_decode_cached = GreedyDecodeCached()
beam_search = BeamSearch()
EXERCISES = [causal_mask, padding_mask, decoder_block, transformer, greedy_decode, greedy_decode_cached,
             beam_search]
check_causal_mask = causal_mask.check
check_padding_mask = padding_mask.check
check_DecoderBlock = decoder_block.check
check_Transformer = transformer.check
check_greedy_decode = greedy_decode.check
check_greedy_decode_cached = greedy_decode_cached.check
check_beam_search = beam_search.check
