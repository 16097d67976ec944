"""Stand-in models that decoders are checked on, and the checks of what decoders and masks return.

- :class:`ScriptedModel`: a translator whose next token follows a script per sentence (greedy
  decoding checked token by token);
- :class:`StandInTranslator`: a Transformer with the notebook's layout (the attributes a cached
  decoder reads), seeded weights, PyTorch's layers doing the work, and :func:`teacher_forced`,
  its logits for every position at once, with switches for the known mistakes of a cached decoder,
  and :func:`stand_in`, a case's stand-in and its source.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from course.checking.blocks import ACTIVATIONS, copy_into_torch, seed_parameters, torch_mask
from course.checking.exercise import Case
from course.checking.failure import CheckFailure
from course.checking.learner import expect_tensor
from course.checking.outputs import seeded


def _in(where: str) -> str:
    return f" in {where}" if where else ""


def expect_bool_mask(value, what: str, where: str = "") -> torch.Tensor:
    """Fail unless ``value`` is a bool tensor (True = may attend)."""
    mask = expect_tensor(value, what, where)
    if mask.dtype != torch.bool:
        raise CheckFailure(f"{what} should be a bool tensor (True = may attend), not "
                           f"{mask.dtype}{_in(where)}. "
                           "Build it with a comparison (tokens != pad_id) or dtype=torch.bool.")
    return mask


def expect_token_ids(out, what: str, sentences: int, bos: int, max_len: int,
                     where: str = "") -> list[list[int]]:
    """A decoder's output as rows of ids, after the checks every decoding exercise shares: a
    tensor of integer ids, shape (sentences, n), every row starting with bos, at most max_len tokens."""
    tokens = expect_tensor(out, what, where)
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise CheckFailure(f"{what} should be token ids, a LongTensor (dtype=torch.long), not {tokens.dtype}"
                           f"{_in(where)}: create the output with dtype=torch.long.")
    if tokens.dim() != 2 or tokens.shape[0] != sentences:
        raise CheckFailure(f"{what} should have shape ({sentences}, n), one row per source sentence, but has "
                           f"shape {tuple(tokens.shape)}{_in(where)}.")
    rows = tokens.tolist()
    if tokens.shape[1] == 0 or any(row[0] != bos for row in rows):
        raise CheckFailure(f"{what} should hold sequences that start with bos_id={bos}{_in(where)}: "
                           "start the "
                           "output with a column of bos_id.")
    if tokens.shape[1] > max_len:
        raise CheckFailure(f"{what} has {tokens.shape[1]} tokens per sentence with max_len={max_len}"
                           f"{_in(where)}: max_len counts every token, <bos> included.")
    return rows


# ---------------------------------------------------------------- a scripted translator

OFF_SCRIPT = 15  # the stand-in's prediction after a prefix its script does not contain
STUB_VOCAB = 16


class ScriptedModel(nn.Module):
    """A stand-in for a trained Transformer with the notebook's interface (encode, decode, pad_id).

    Sentence b has a script; after a decoder input that is a prefix of its script, the model
    predicts the script's next token, and ``OFF_SCRIPT`` after anything else. The memory
    carries each sentence's key (its first source token), so the script follows the
    sentence whatever order or subset of rows is decoded.
    """

    def __init__(self, scripts: Mapping[int, list[int]], pad_id: int = 0):
        super().__init__()
        self.scripts, self.pad_id = dict(scripts), pad_id
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


def scripted_batch(scripts: list[list[int]], device="cpu") -> tuple[ScriptedModel, torch.Tensor]:
    """The scripted model of one script per sentence and its source batch (B, 4): row b's first
    token is its key 10 + b, odd rows end with one padding token."""
    keyed = {10 + b: s for b, s in enumerate(scripts)}
    src = torch.tensor([[key, 5, 6, 7][: 4 - b % 2] + [0] * (b % 2) for b, key in enumerate(keyed)],
                       dtype=torch.long, device=device)
    return ScriptedModel(keyed).to(device), src


# ---------------------------------------------------------------- a stand-in Transformer

STAND_IN_DIMS = (12, 3, 10, 11, 13)  # d_model, h, d_ff, source and target vocabularies
STAND_IN_MAX_LEN = 16  # rows of the stand-in's positional table


class _Attention(nn.Module):
    """The notebook's MultiHeadAttention layout (w_q, w_k, w_v, w_o, num_heads), computed by
    F.scaled_dot_product_attention (whose boolean masks also mean True = may attend)."""

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.num_heads = heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        def heads(t):  # (B, n, d_model) -> (B, h, n, d_model // h)
            return t.unflatten(-1, (self.num_heads, -1)).transpose(1, 2)

        mixed = F.scaled_dot_product_attention(heads(self.w_q(query)), heads(self.w_k(key)),
                                               heads(self.w_v(value)), attn_mask=mask)
        return self.w_o(mixed.transpose(1, 2).flatten(2)), None  # no weights: a stand-in


class _StandInBlock(nn.Module):
    """The notebook's TransformerBlock (``cross=False``) or DecoderBlock layout; it computes with
    nn.TransformerEncoderLayer / nn.TransformerDecoderLayer holding its weights."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, activation: str, norm_first: bool,
                 cross: bool):
        super().__init__()
        self.self_attn = _Attention(d_model, num_heads)
        if cross:
            self.cross_attn = _Attention(d_model, num_heads)
        self.ffn = nn.Sequential()  # the notebook's FeedForward: linear1, activation, linear2
        self.ffn.add_module("linear1", nn.Linear(d_model, d_ff))
        self.ffn.add_module("activation", ACTIVATIONS[activation]())
        self.ffn.add_module("linear2", nn.Linear(d_ff, d_model))
        for name in ("norm1", "norm2", "norm3") if cross else ("norm1", "norm2"):
            self.add_module(name, nn.LayerNorm(d_model))
        self.norm_first, self.activation = norm_first, activation

    def as_torch_layer(self, norm_first: bool | None = None) -> nn.Module:
        """PyTorch's layer with this block's weights (``norm_first`` overrides the block's), built once
        (the weights of a stand-in never change): the fixed-device probe then sees none of its tensors."""
        norm_first = self.norm_first if norm_first is None else norm_first
        built = self.__dict__.setdefault("_torch_layers", {})  # a plain dict: not submodules
        if norm_first not in built:
            d, d_ff = self.norm1.normalized_shape[0], self.ffn.linear1.out_features
            kind = nn.TransformerDecoderLayer if hasattr(self, "cross_attn") else nn.TransformerEncoderLayer
            layer = kind(d, self.self_attn.num_heads, d_ff, dropout=0.0, activation=self.activation,
                         batch_first=True, norm_first=norm_first)
            built[norm_first] = copy_into_torch(layer.to(self.norm1.weight.device, self.norm1.weight.dtype),
                                                self).eval()
        return built[norm_first]

    def forward(self, x, memory=None, tgt_mask=None, memory_mask=None, mask=None):
        B, n, h = x.shape[0], x.shape[1], self.self_attn.num_heads
        if not hasattr(self, "cross_attn"):  # TransformerBlock.forward(x, mask)
            return self.as_torch_layer()(x, src_mask=torch_mask(memory if mask is None else mask, B, h, n, n))
        return self.as_torch_layer()(x, memory, tgt_mask=torch_mask(tgt_mask, B, h, n, n),
                                     memory_mask=torch_mask(memory_mask, B, h, n, memory.shape[1]))


class _Table(nn.Module):
    def __init__(self, pe: torch.Tensor):
        super().__init__()
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.shape[1]]


class StandInTranslator(nn.Module):
    """A Transformer with the notebook's layout (the attributes a cached decoder reads), seeded
    weights, a seeded positional table, and PyTorch's layers doing the work."""

    def __init__(self, layers, norm_first: bool, activation: str, pad_id: int, seed: int,
                 dtype: torch.dtype = torch.float64):
        super().__init__()
        d, h, d_ff, v_s, v_t = STAND_IN_DIMS
        self.pad_id = pad_id
        self.src_embed, self.tgt_embed = nn.Embedding(v_s, d), nn.Embedding(v_t, d)
        self.pos_encoding = _Table(seeded(STAND_IN_MAX_LEN, d, seed=seed + 500))
        block = (d, h, d_ff, activation, norm_first)
        self.encoder_layers = nn.ModuleList(_StandInBlock(*block, cross=False) for _ in range(layers[0]))
        self.decoder_layers = nn.ModuleList(_StandInBlock(*block, cross=True) for _ in range(layers[1]))
        final = (lambda: nn.LayerNorm(d)) if norm_first else nn.Identity  # pre-norm stacks end with one
        self.encoder_norm, self.decoder_norm = final(), final()
        self.out = nn.Linear(d, v_t)
        seed_parameters(self, seed)
        with torch.no_grad():  # like a trained model, greedy choices that change from step to step:
            for module in self.modules():  # LayerNorms as initialised, larger embeddings, a sharper output
                if isinstance(module, nn.LayerNorm):
                    module.reset_parameters()
            for weight in (self.src_embed.weight, self.tgt_embed.weight):
                weight.mul_(2.0)
            self.out.weight.mul_(3.0)
            self.out.bias.zero_()
        self.to(dtype).eval()

    def encode(self, src, src_mask):
        memory = self.src_embed(src) + self.pos_encoding.pe[: src.shape[1]]  # (B, n_src, d_model)
        for layer in self.encoder_layers:
            memory = layer(memory, mask=src_mask)
        return self.encoder_norm(memory)

    def decode(self, tgt, memory, src_mask):
        n = tgt.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt.device).tril()  # True = may attend
        y = self.tgt_embed(tgt) + self.pos_encoding.pe[:n]  # (B, n, d_model)
        for layer in self.decoder_layers:  # through the blocks, so that the check sees them work
            y = layer(y, memory, causal, src_mask)
        return self.out(self.decoder_norm(y))

    def forward(self, src, tgt):
        src_mask = (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, n_src): padding_mask
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask)


def stand_in(case: Case) -> tuple[StandInTranslator, torch.Tensor]:
    """The case's stand-in and its source (B, n_src): ``params`` give ``layers`` (encoder, decoder
    blocks), ``short`` (the pads that end each sentence), ``n_src``, and optionally ``norm_first``,
    ``activation`` and ``pad``."""
    p, pad = case.params, case.params.get("pad", 0)
    model = StandInTranslator(p["layers"], p.get("norm_first", False), p.get("activation", "relu"), pad,
                              case.seed, case.dtype)
    g = torch.Generator().manual_seed(case.seed)
    src = torch.randint(0, STAND_IN_DIMS[3] - 1, (len(p["short"]), p["n_src"]), generator=g)
    src = src + (src >= pad).long()  # never pad ...
    for b, pads in enumerate(p["short"]):  # ... but at the end of the shorter sentences
        src[b, p["n_src"] - pads:] = pad
    return model, src


def teacher_forced(model: StandInTranslator, tgt, memory, src_mask, *, position: str = "own",
                   self_mask: str = "causal", memory_mask: bool = True, decoder_norm: bool = True,
                   norm_first: bool | None = None) -> torch.Tensor:
    """The stand-in's logits (B, n, vocab) for the decoder input tgt, every position at once, by
    nn.TransformerDecoderLayer with the blocks' weights. The keywords switch on one known
    mistake of a cached decoder each: position "zero" or "next" (the table row added to each
    token), self_mask "own" (each position sees only itself), no memory_mask, no decoder_norm,
    norm_first forced."""
    B, n, n_src = tgt.shape[0], tgt.shape[1], memory.shape[1]
    pe = model.pos_encoding.pe
    rows = {"own": pe[:n], "zero": pe[:1].expand(n, -1), "next": pe[1:n + 1]}[position]
    seen = torch.ones(n, n, dtype=torch.bool, device=tgt.device).tril()  # True = may attend: causal ...
    if self_mask == "own":
        seen = torch.eye(n, dtype=torch.bool, device=tgt.device)  # ... or each position itself only
    y = model.tgt_embed(tgt) + rows
    for stand_in in model.decoder_layers:
        heads = stand_in.self_attn.num_heads
        y = stand_in.as_torch_layer(norm_first)(
            y, memory, tgt_mask=torch_mask(seen, B, heads, n, n),
            memory_mask=torch_mask(src_mask if memory_mask else None, B, heads, n, n_src))
    return model.out(model.decoder_norm(y) if decoder_norm else y)
