"""``GPT(vocab_size, d_model, num_heads, d_ff, num_layers, max_len, pad_id=0, dropout=0.0)``: the exercise
(inputs, reference, known mistakes, visible cases) and its visible check.

The reference is PyTorch's own layers holding the case's seeded weights: ``F.embedding``, one
``nn.TransformerEncoderLayer(activation="gelu", norm_first=True, batch_first=True)`` per block (the block's
w_q, w_k, w_v stacked into its ``in_proj``), causal and key-padding masks, ``F.layer_norm``
and the output layer as ``F.linear`` with the token embedding itself (tied). Only the logits of
real tokens are compared: padding comes last, so the causal mask alone already hides it from
them, and what a padded position predicts is never used.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    close,
    expect_shape,
    expect_tensor,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
    with_gradients,
)
from course.checking.blocks import (
    DROPPING,
    UNSCALED_DROPOUT,
    dropout_scale,
    kept_scale,
    recorded,
    unscaled_scale,
)
from course.checking.forbidden import ATTENTION, MULTIHEAD
from course.checking.modules import load_parameters

HOW = ("GPT's submodules, created in this order: tok_embed (an nn.Embedding of vocab_size vectors of size "
       "d_model), pos_embed (an nn.Embedding of max_len positions), blocks (an nn.ModuleList of num_layers "
       "TransformerBlocks: pre-norm, GELU, the model's dropout), norm (a final nn.LayerNorm over d_model), "
       "lm_head (an nn.Linear from d_model to vocab_size without bias) whose weight is tok_embed's weight "
       "itself.")
AGAINST = 'nn.TransformerEncoderLayer(activation="gelu", norm_first=True) blocks with the same weights'
ORDER = ("tok_embed", "pos_embed", "blocks", "norm", "lm_head")
NOT_TIED = Mistake("not_tied", "an output layer with its own weight (a copy, not tok_embed.weight itself)",
                   "Tie them: lm_head's weight must be tok_embed's nn.Parameter itself (one matrix, trained "
                   "once), not a copy of its values.")
NO_POSITIONS = Mistake("no_positions", "token embeddings without the position embeddings",
                       "Add self.pos_embed(torch.arange(n, device=ids.device)) to self.tok_embed(ids).")
SINUSOIDAL = Mistake("sinusoidal_positions", "fixed sinusoidal positions instead of the learned pos_embed",
                     "GPT learns its positions: add self.pos_embed(torch.arange(n, device=ids.device)).")
SCALED = Mistake("scaled_embeddings", "token embeddings multiplied by sqrt(d_model)",
                 "A GPT does not scale its embeddings (that is the original Transformer's habit): "
                 "x = tok_embed(ids) + pos_embed(positions).")
POST_NORM = Mistake("post_norm", "post-norm blocks (norm_first=False)",
                    "Create every block with TransformerBlock(..., norm_first=True).")
RELU = Mistake("relu_blocks", "blocks with ReLU feed-forward networks instead of GPT-2's GELU",
               "Every block's feed-forward network uses GELU, as GPT-2's: look at the activation each "
               "TransformerBlock is created with.")
NO_FINAL_NORM = Mistake("no_final_norm", "no final LayerNorm before the output layer",
                        "A pre-norm stack ends with one more norm: logits = lm_head(norm(x)).")
NOT_CAUSAL = Mistake("not_causal", "no causal mask: every token sees the tokens after it",
                     "Pass causal_mask(n, device=ids.device) to every block (True = may attend).")
NO_MASK = Mistake("no_mask", "no mask at all: every token sees the tokens after it, padding included",
                  "Pass causal_mask(n, device=ids.device) to every block (True = may attend); padding comes "
                  "last, so that mask alone also hides it.")
PAD_ID_ZERO = Mistake("pad_id_zero", "keys masked where the id is 0 instead of pad_id",
                      "Padding is the model's pad_id: padding_mask(ids, self.pad_id), if you mask it at all "
                      "(it comes last, so the causal mask already hides it from every real token).")
NO_EMBEDDING_DROPOUT = Mistake(
    "no_embedding_dropout", "no dropout on the sum of the embeddings",
    "Create nn.Dropout(dropout); apply it to tok_embed(ids) + pos_embed(positions) before the first block.")
DROPOUT_BEFORE_POSITIONS = Mistake(
    "dropout_before_positions", "dropout applied to the token embeddings before the positions are added "
    "(the position embeddings never pass it)",
    "The embedding dropout acts on the sum of the token and the position embeddings, after adding them.")
BLOCKS_WITHOUT_DROPOUT = Mistake(
    "blocks_without_dropout", "blocks created without the dropout argument",
    "Every block gets the model's dropout too: look at the arguments each TransformerBlock is created with.")
MISTAKES = {NO_POSITIONS: {"positions": "none"}, SINUSOIDAL: {"positions": "sinusoidal"},
            SCALED: {"scale": True}, POST_NORM: {"norm_first": False}, RELU: {"activation": "relu"},
            NO_FINAL_NORM: {"final_norm": False}, NOT_CAUSAL: {"causal": False}, PAD_ID_ZERO: {"padding": 0},
            NO_MASK: {"causal": False, "padding": False}}


@dataclass(frozen=True)
class Config:
    vocab_size: int
    d_model: int
    num_heads: int
    d_ff: int
    num_layers: int
    max_len: int
    pad_id: int

    def args(self):
        return (self.vocab_size, self.d_model, self.num_heads, self.d_ff, self.num_layers, self.max_len)

    def shapes(self) -> dict[str, tuple]:
        """The contract's parameters (the tied output weight is tok_embed.weight) and their shapes."""
        d, d_ff = self.d_model, self.d_ff
        block = {**{f"self_attn.w_{w}.{k}": (d, d) if k == "weight" else (d,) for w in "qkvo"
                    for k in ("weight", "bias")},
                 "ffn.linear1.weight": (d_ff, d), "ffn.linear1.bias": (d_ff,),
                 "ffn.linear2.weight": (d, d_ff), "ffn.linear2.bias": (d,),
                 **{f"norm{i}.{k}": (d,) for i in (1, 2) for k in ("weight", "bias")}}
        return {"tok_embed.weight": (self.vocab_size, d), "pos_embed.weight": (self.max_len, d),
                **{f"blocks.{i}.{k}": s for i in range(self.num_layers) for k, s in block.items()},
                "norm.weight": (d,), "norm.bias": (d,)}


CONFIG = Config(vocab_size=11, d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=7, pad_id=1)


def gpt_case(name: str, seed: int, cfg: Config, B: int, n: int, padded: int, dtype=torch.float64, *,
             kind: str = "", dropout: float = 0.0) -> Case:
    """A case: the model's config and ids (B, n), the last ``padded`` of row 0 pad_id's; with
    0 < dropout < 1, in train() mode, where only the scale of what the embedding dropout keeps is compared."""
    return Case(name, seed, {"config": cfg, "B": B, "n": n, "padded": padded, "dropout": dropout}, dtype,
                kind=kind or (DROPPING if 0 < dropout < 1 else ""))


def dropping(params) -> bool:
    """A case in train() mode with 0 < dropout < 1."""
    return 0 < params.get("dropout", 0.0) < 1


CASES = [
    gpt_case("float32, 2 sentences, row 0 ends with 2 pad_id's", 0, CONFIG, 2, 6, 2, torch.float32,
             kind="padding"),
    gpt_case("float64, n = max_len", 1, CONFIG, 2, 7, 3, kind="n = max_len"),
    gpt_case("float64, one token", 2, CONFIG, 3, 1, 0, kind="one token"),
    gpt_case("float64, one block of one head, pad_id=0, no padding", 3, Config(7, 4, 1, 8, 1, 5, 0), 2, 5, 0,
             kind="no padding"),
    gpt_case("float64, dropout=0.25 in train() mode", 4, CONFIG, 3, 7, 0, dropout=0.25),
]
SCALE = "the scale of what the embedding dropout keeps"  # 1 / (1 - p), whatever the masks
DROPOUT_CONFIG = Config(vocab_size=9, d_model=4, num_heads=2, d_ff=8, num_layers=2, max_len=6, pad_id=0)


def fail(message: str, mistake: Mistake | None = None):
    raise CheckFailure(message + (f"\n{mistake.sentence()}" if mistake else ""), mistake)


def expect_layout(model, cfg: Config) -> None:
    """The contract's submodules, in order, with their shapes, the tied output layer, no other parameter."""
    if not isinstance(model, nn.Module):
        fail(f"GPT(...) should create an nn.Module, not a {type(model).__name__}.")
    kinds = {"tok_embed": nn.Embedding, "pos_embed": nn.Embedding, "blocks": nn.ModuleList,
             "norm": nn.LayerNorm, "lm_head": nn.Linear}
    for name, kind in kinds.items():
        if not isinstance(getattr(model, name, None), kind):
            fail(f"GPT needs self.{name}, an {kind.__name__}. {HOW}")
    order = [name for name in model._modules if name in ORDER]
    if order != list(ORDER):
        fail(f"GPT creates its submodules in the order {', '.join(order)}: create them in the contract's "
             f"order (so that a seed gives everyone the same model). {HOW}")
    if len(model.blocks) != cfg.num_layers:
        fail(f"GPT(num_layers={cfg.num_layers}) has {len(model.blocks)} blocks. {HOW}")
    if model.lm_head.bias is not None:
        fail(f"GPT.lm_head should have no bias (bias=False). {HOW}")
    if model.lm_head.weight is not model.tok_embed.weight:
        fail("GPT.lm_head.weight is not tok_embed.weight.", NOT_TIED)
    if model.norm.eps != 1e-5:
        fail(f"GPT.norm has eps={model.norm.eps}: use nn.LayerNorm(d_model)'s default eps=1e-5.")
    have, want = dict(model.named_parameters()), cfg.shapes()
    missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
    if missing or extra:
        detail = "; ".join(p for p in (f"missing {', '.join(missing)}" if missing else "",
                                       f"unexpected {', '.join(extra)}" if extra else "") if p)
        fail(f"GPT has the wrong parameters ({detail}). {HOW}")
    for name, shape in want.items():
        if tuple(have[name].shape) != shape:
            fail(f"GPT: parameter {name} has shape {tuple(have[name].shape)}, expected {shape}. {HOW}")


def seeded_values(cfg: Config, seed: int, dtype, device="cpu") -> dict[str, torch.Tensor]:
    """Seeded values for every parameter (norm weights around 1), the same on every machine."""
    g = generator(seed + 104729)
    def norm_weight(name):
        return name.endswith(".weight") and name.split(".")[-2].startswith("norm")
    return {name: randn(shape, g, dtype, device, 0.5) + (1 if norm_weight(name) else 0)
            for name, shape in cfg.shapes().items()}


def make_ids(cfg: Config, B: int, n: int, padded: int, seed: int, device="cpu") -> torch.Tensor:
    """(B, n) ids with no pad_id but the last ``padded`` of row 0."""
    ids = torch.randint(0, cfg.vocab_size - 1, (B, n), generator=generator(seed))
    ids = ids + (ids >= cfg.pad_id).long()  # skips pad_id
    ids[0, n - padded:] = cfg.pad_id
    return ids.to(device)


@functools.cache
def _layer(d: int, h: int, d_ff: int, norm_first: bool, activation: str) -> nn.Module:
    """A parameter-less template: functional_call supplies every weight."""
    layer = nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    return layer.train()  # dropout is 0; train() keeps PyTorch off its fused inference path


def _sinusoidal(n: int, d: int, like: torch.Tensor) -> torch.Tensor:
    position = torch.arange(n, dtype=torch.float64)[:, None]  # (n, 1)
    omega = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)  # (ceil(d / 2),)
    table = torch.stack([(position * omega).sin(), (position * omega).cos()], dim=-1).flatten(-2)[:, :d]
    return table.to(like.device, like.dtype)  # (n, d)


def reference_logits(p: dict[str, torch.Tensor], ids: torch.Tensor, cfg: Config, *,
                     positions="learned", scale=False, norm_first=True, activation="gelu", final_norm=True,
                     causal=True, padding=True) -> torch.Tensor:
    """The logits through PyTorch's layers holding ``p``; the keywords switch on known mistakes."""
    n, d = ids.shape[1], cfg.d_model
    x = F.embedding(ids, p["tok_embed.weight"]) * (math.sqrt(d) if scale else 1)  # (B, n, d)
    if positions == "learned":
        x = x + p["pos_embed.weight"][:n]
    elif positions == "sinusoidal":
        x = x + _sinusoidal(n, d, x)
    blocked = torch.ones(n, n, dtype=torch.bool, device=ids.device).triu(1) if causal else None  # (n, n)
    pad_id = cfg.pad_id if padding is True else padding  # an id: the mistake of another pad_id
    padded = None if padding is False else (ids == pad_id)  # (B, n), True = ignored
    layer = _layer(d, cfg.num_heads, cfg.d_ff, norm_first, activation)
    for i in range(cfg.num_layers):
        b = {k.removeprefix(f"blocks.{i}."): v for k, v in p.items() if k.startswith(f"blocks.{i}.")}
        weights = {"self_attn.in_proj_weight": torch.cat([b[f"self_attn.w_{w}.weight"] for w in "qkv"]),
                   "self_attn.in_proj_bias": torch.cat([b[f"self_attn.w_{w}.bias"] for w in "qkv"]),
                   "self_attn.out_proj.weight": b["self_attn.w_o.weight"],
                   "self_attn.out_proj.bias": b["self_attn.w_o.bias"],
                   **{f"{k}.{t}": b[f"ffn.{k}.{t}" if k.startswith("linear") else f"{k}.{t}"]
                      for k in ("linear1", "linear2", "norm1", "norm2") for t in ("weight", "bias")}}
        x = functional_call(layer, weights, (x,), {"src_mask": blocked, "src_key_padding_mask": padded})
    if final_norm:
        x = F.layer_norm(x, (d,), p["norm.weight"], p["norm.bias"])
    return F.linear(x, p["tok_embed.weight"])  # (B, n, vocab_size): the tied output layer


def real(logits: torch.Tensor, ids: torch.Tensor, cfg: Config) -> torch.Tensor:
    """(B, n, V) -> (N, V): the logits of the N real tokens (padded positions are not graded)."""
    return logits[ids != cfg.pad_id]


def inputs(case: Case, device) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The seeded values of every parameter and the ids (B, n) of a case."""
    cfg, p = case.params["config"], case.params
    values = seeded_values(cfg, case.seed, case.dtype, device)
    return values, make_ids(cfg, p["B"], p["n"], p["padded"], case.seed, device)


def outputs(forward, leaves: dict[str, torch.Tensor], ids, cfg: Config, seed: int):
    """``forward()``'s logits at the real tokens, with the gradients of every parameter."""
    return with_gradients(lambda: (real(forward(), ids, cfg),), ("output",), leaves, seed)


def reference_outputs(case: Case, device):
    """The reference's logits at the real tokens and the gradients of every parameter on a case."""
    values, ids = inputs(case, device)
    leaves = {k: v.requires_grad_() for k, v in values.items()}
    cfg = case.params["config"]
    return outputs(lambda: reference_logits(leaves, ids, cfg), leaves, ids, cfg, case.seed)


def variant_outputs(case: Case, device, changes: dict):
    """A known mistake's logits at the real tokens (no gradients: they only name a mistake)."""
    if dropping(case.params):
        return {}  # only the scale is compared there
    values, ids = inputs(case, device)
    cfg = case.params["config"]
    with torch.no_grad():
        return {"output": real(reference_logits(values, ids, cfg, **changes), ids, cfg)}


class GPTModel(Exercise):
    forbidden = ATTENTION | MULTIHEAD
    name = "GPT"
    reference_name = AGAINST
    mistakes = {**{m: functools.partial(variant_outputs, changes=changes) for m, changes in MISTAKES.items()},
                UNSCALED_DROPOUT: lambda case, device: (
                    {SCALE: unscaled_scale(device)} if dropping(case.params) else {})}
    visible_cases = CASES
    #: The model whose dropout the dropout cases check first (where it acts, at dropout=1.0).
    dropout_config = DROPOUT_CONFIG

    def run(self, impl, case, device):
        cfg = case.params["config"]
        rate = {"dropout": case.params["dropout"]} if dropping(case.params) else {}
        if rate and not self.probing:  # the dropout case checks where it acts (dropout=1.0), then its scale
            self.embedding_dropout(impl, self.dropout_config)
        model = self.build(impl, case, *cfg.args(), pad_id=cfg.pad_id, **rate)
        expect_layout(model, cfg)
        values, ids = inputs(case, device)
        params = load_parameters(model.to(device), values, self.name, HOW)
        if rate:
            return {SCALE: self.embedding_scale(model.train(), values, ids, cfg, case).to(device)}
        return outputs(lambda: self.logits(model, ids, cfg, case), params, ids, cfg, case.seed)

    def reference(self, case, device):
        if dropping(case.params):
            return {SCALE: dropout_scale(case.params["dropout"], device)}
        return reference_outputs(case, device)

    def embedding_scale(self, model, values, ids, cfg: Config, where) -> torch.Tensor:
        """What enters blocks[0] over the embeddings' sum, where dropout kept it: 1 / (1 - p) for
        nn.Dropout."""
        with torch.no_grad():
            _, seen = recorded(model, lambda: self.logits(model, ids, cfg, where), (), ("blocks.0",))
            summed = F.embedding(ids, values["tok_embed.weight"]) + values["pos_embed.weight"][:ids.shape[1]]
        return kept_scale([(summed, seen.get("blocks.0 in"))])

    def logits(self, model, ids, cfg: Config, where) -> torch.Tensor:
        """The learner's logits (B, n, vocab_size), shape checked."""
        logits = expect_tensor(self.call(where, model, ids), "GPT.forward", where)
        expect_shape(logits, (*ids.shape, cfg.vocab_size), "GPT.forward", where)
        return logits

    def embedding_dropout(self, impl, cfg: Config) -> None:
        """GPT(..., dropout=1.0) in train mode: dropout on the embeddings' sum zeroes what enters the
        blocks, whose own dropout zeroes what they add, so every logit is the final norm's bias scored by
        the tied output layer, whatever the ids."""
        args = ", ".join(map(str, cfg.args()))
        model = self.call(f"GPT({args}, dropout=1.0)", impl, *cfg.args(), pad_id=cfg.pad_id, dropout=1.0)
        expect_layout(model, cfg)
        values = seeded_values(cfg, 5, torch.float32)
        load_parameters(model, values, self.name, HOW)
        ids = make_ids(cfg, 2, cfg.max_len, 0, 5)
        model.train()
        with torch.no_grad():
            got = self.logits(model, ids, cfg, "GPT(..., dropout=1.0) in train mode")
        want = F.linear(values["norm.bias"], values["tok_embed.weight"]).expand_as(got)  # (B, n, V)
        if close(got, want, *tolerance(torch.float32)):
            return
        expected = ("With dropout=1.0 in train mode, every logit of GPT should be the final norm's bias "
                    "times the tied output layer (nothing passes the dropouts), but ")
        if close(got, got[:1, :1].expand_as(got), *tolerance(torch.float32)):  # the same everywhere
            fail(expected + "the blocks still add to what enters them.", BLOCKS_WITHOUT_DROPOUT)
        if close(got, got[:1].expand_as(got), *tolerance(torch.float32)):  # every sentence alike: no ids
            fail(expected + "the logits still change from position to position (the same in every sentence, "
                 "whatever its ids).", DROPOUT_BEFORE_POSITIONS)
        fail(expected + "the logits still depend on the ids.", NO_EMBEDDING_DROPOUT)


@visible_check
def check_GPT(GPT) -> None:
    """Layout and tied weights, then logits and gradients against PyTorch's layers with the same weights;
    dropout on the embeddings (what it keeps scaled by 1 / (1 - p)) and in the blocks."""
    GPTModel().run_cases(GPT)
    passed("GPT has learned positions, dropout on the embeddings (scaled by 1 / (1 - p)), pre-norm GELU "
           "blocks, a final norm and a "
           "tied output layer; its logits and gradients at the real tokens match PyTorch's layers with the "
           "causal mask.")
