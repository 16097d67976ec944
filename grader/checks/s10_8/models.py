"""10.6's Transformer built by the check (the attribute names of the notebook's table), the
models and sources the decoding checks run on, and greedy decoding as the solution writes it."""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from course.visible.s10_6.transformer import (
    MODEL_DIMS,
    model_options,
    token_ids,
    transformer_shapes,
)
from grader.checks.exercise import seeded_parameters
from grader.checks.guarded_calls import Case, generator
from grader.checks.shared_references import attention_weights, sinusoidal_table


def source_mask(src: torch.Tensor, pad: int) -> torch.Tensor:
    return (src != pad)[:, None, None, :]  # (B, 1, 1, n_src): padding_mask, which grading alone holds

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
        o = model_options(case)
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
        src_mask = source_mask(src, self.pad_id)
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
    pad = model_options(case)["pad"]
    src = token_ids((B, n), MODEL_DIMS[6], pad, generator(case.seed + 1))
    for b, short in enumerate(case.params["short"]):
        if short:
            src[b, n - short:] = pad
    return src.to(device)


def reference_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int):
    """greedy_decode as the notebook's solution writes it: (ids (B, n), smallest top-2 margin)."""
    with torch.no_grad():
        return _reference_greedy(model, src, bos, eos, max_len)


def _reference_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int):
    src_mask = source_mask(src, model.pad_id)
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

