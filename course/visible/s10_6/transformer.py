"""Visible check of ``Transformer``: encode, decode and forward against PyTorch's layers holding the
model's weights, with the notebook's conventions around them; and its known mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    CheckFailure,
    Mistake,
    call_learner,
    close,
    compare_outputs,
    expect_distinct,
    expect_shape,
    expect_tensor,
    passed,
    tolerance,
    visible_check,
)
from course.checking.blocks import (
    block_parameter_names,
    copy_into_torch,
    expect_parameters,
    seed_parameters,
    torch_mask,
)
from course.visible.s10_6.decoder_block import lengths_mask

HOW = ("Follow the notebook's table: src_embed and tgt_embed, two nn.Embedding(vocab size, d_model); "
       "pos_encoding, a PositionalEncoding(d_model, max_len, dropout); encoder_layers and decoder_layers, "
       "nn.ModuleLists of num_encoder_layers TransformerBlocks and num_decoder_layers DecoderBlocks; "
       "encoder_norm and decoder_norm, nn.LayerNorm(d_model) when norm_first=True, else nn.Identity() "
       "(a post-norm block already ends with a LayerNorm); out, an nn.Linear(d_model, tgt_vocab_size).")
PADDING_HINT = ("Pass src_mask = padding_mask(src, pad_id) to every encoder block and, as memory_mask, to "
                "every decoder block.")
FORWARD_HINT = "forward should build padding_mask(src, self.pad_id) and run encode, then decode."
NO_CAUSAL = Mistake("no_causal", "a decoder without the causal mask",
                    "In decode, build causal_mask(n_tgt, device=tgt.device) and pass it as tgt_mask to every "
                    "DecoderBlock: while training, position i must not see target tokens after i.")
FUTURE_MASK = Mistake("future_mask", "a decoder whose mask shows each position the future instead of "
                                     "the past",
                      "The decoder's mask is causal_mask(n_tgt): True on and below the diagonal (check that "
                      "causal_mask passes its own test).")
NO_PADDING = Mistake("no_padding", "a model that ignores the source padding", PADDING_HINT)
NO_ENCODER_PADDING = Mistake("no_encoder_padding", "encoder blocks without the source padding mask",
                             PADDING_HINT)
NO_CROSS_PADDING = Mistake("no_cross_padding", "decoder blocks without the source padding mask (memory_mask)",
                           PADDING_HINT)
NO_FINAL_NORM = Mistake("no_final_norm", "pre-norm stacks without their final LayerNorms",
                        "With norm_first=True apply self.encoder_norm to the encoder's output and "
                        "self.decoder_norm before self.out: a pre-norm residual stream is never normalised.")
NO_ENCODER_NORM = Mistake("no_encoder_norm", "a pre-norm encoder without its final LayerNorm",
                          "With norm_first=True encode ends with self.encoder_norm.")
NO_DECODER_NORM = Mistake("no_decoder_norm", "a pre-norm decoder without its final LayerNorm",
                          "With norm_first=True decode applies self.decoder_norm before self.out.")
BLOCK_NORM_FIRST = Mistake("block_norm_first", "blocks that do not get norm_first",
                           "Pass norm_first (and dropout, activation) on to every TransformerBlock and "
                           "DecoderBlock.")
BLOCK_ACTIVATION = Mistake("block_activation", "blocks that do not get the activation",
                           "Pass activation on to every TransformerBlock and DecoderBlock.")
PROBABILITIES = Mistake("probabilities", "probabilities (a softmax) returned instead of logits",
                        "decode returns self.out(...) as it is: the loss and greedy decoding take logits.")
EMB_SCALE = Mistake("emb_scale", "embeddings multiplied by sqrt(d_model)",
                    "This notebook adds the positional encoding to the embeddings as they are: nn.Embedding "
                    "starts with values of size 1 already.")
NO_TGT_POSITIONS = Mistake("no_tgt_positions", "target embeddings without the positional encoding",
                           "Apply self.pos_encoding to the target embeddings too.")
NO_SRC_POSITIONS = Mistake("no_src_positions", "source embeddings without the positional encoding",
                           "Apply self.pos_encoding to the source embeddings too.")

MODEL_DIMS = (2, 6, 5, 12, 3, 10, 11, 13)  # B, n_src, n_tgt, d_model, h, d_ff, src and tgt vocabularies
MAX_LEN = 16
CASES = [  # name, (encoder, decoder blocks), norm_first, activation, pad_id, dtype
    ("post-norm, 2 encoder blocks and 1 decoder block, source padding", (2, 1), False, "relu", 0,
     torch.float64),
    ("pre-norm (with the final LayerNorms), gelu, 1 + 2 blocks", (1, 2), True, "gelu", 0, torch.float64),
    ("pad_id=3, post-norm, 1 + 1 blocks, float32", (1, 1), False, "relu", 3, torch.float32),
]


def _token_ids(B, n, vocab, pad, seed):
    """Random ids in [0, vocab) that are never pad."""
    ids = torch.randint(0, vocab - 1, (B, n), generator=torch.Generator().manual_seed(seed))
    return ids + (ids >= pad).long()


def _inputs(pad, seed):
    """src (B, n_src) with padding at the end of every row but one, and tgt (B, n_tgt)."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    src = _token_ids(B, n_s, v_s, pad, seed)
    src = src.masked_fill(~lengths_mask(B, n_s)[:, 0, 0, :], pad)
    src[-1] = _token_ids(1, n_s, v_s, pad, seed + 1)[0]  # the last sentence has no padding
    return src, _token_ids(B, n_t, v_t, pad, seed + 2)


def expect_layout(model: nn.Module, n_enc: int, n_dec: int, norm_first: bool) -> None:
    """The attributes of the notebook's table, distinct, with the contract's parameter names."""
    d = MODEL_DIMS[3]
    kinds = {"src_embed": nn.Embedding, "tgt_embed": nn.Embedding, "pos_encoding": nn.Module,
             "encoder_layers": nn.ModuleList, "decoder_layers": nn.ModuleList,
             "encoder_norm": nn.LayerNorm if norm_first else nn.Identity,
             "decoder_norm": nn.LayerNorm if norm_first else nn.Identity, "out": nn.Linear}
    for name, kind in kinds.items():
        if not isinstance(getattr(model, name, None), kind):
            raise CheckFailure(f"Transformer(..., norm_first={norm_first}) needs self.{name} = "
                               f"{kind.__name__}(...). "
                               f"{HOW}")
    expect_distinct(model, "Transformer", ("src_embed", "tgt_embed"), HOW)
    for stack, count in (("encoder_layers", n_enc), ("decoder_layers", n_dec)):
        blocks = getattr(model, stack)
        if len(blocks) != count:
            raise CheckFailure(f"Transformer(..., num_encoder_layers={n_enc}, "
                               f"num_decoder_layers={n_dec}) has "
                               f"{len(blocks)} blocks in {stack}, not {count}. {HOW}")
        if len({id(b) for b in blocks}) != len(blocks):
            raise CheckFailure(f"Transformer.{stack} holds one block several times (the same object): every "
                               f"layer needs its own block, created in a loop. {HOW}")
    pe = getattr(model.pos_encoding, "pe", None)
    if not isinstance(pe, torch.Tensor) or tuple(pe.shape) != (MAX_LEN, d):
        raise CheckFailure(f"Transformer(..., max_len={MAX_LEN}) needs self.pos_encoding = "
                           "PositionalEncoding("
                           f"d_model, max_len, dropout), with its table pe of shape ({MAX_LEN}, {d}).")
    want = {"src_embed.weight", "tgt_embed.weight", "out.weight", "out.bias"}
    want |= {f"encoder_layers.{i}.{k}" for i in range(n_enc)
             for k in block_parameter_names(("self_attn",), ("norm1", "norm2"))}
    want |= {f"decoder_layers.{i}.{k}" for i in range(n_dec)
             for k in block_parameter_names(("self_attn", "cross_attn"), ("norm1", "norm2", "norm3"))}
    if norm_first:
        want |= {f"{n}.{k}" for n in ("encoder_norm", "decoder_norm") for k in ("weight", "bias")}
    expect_parameters("Transformer", model, want, HOW)


def torch_transformer(model: nn.Module, spec, *, tgt_mask="causal", encoder_padding=True, cross_padding=True,
                      final_norm=("encoder", "decoder"), scale=1.0, src_positions=True, tgt_positions=True,
                      block_norm_first=None, block_activation=None, probabilities=False):
    """(src, tgt) -> (memory at real tokens, logits) from PyTorch layers holding the model's weights.

    The keywords switch on one known mistake each.
    """
    case, (n_enc, n_dec), norm_first, activation, pad, dtype = spec
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    options = {"dim_feedforward": d_ff, "dropout": 0.0, "activation": block_activation or activation,
               "batch_first": True,
               "norm_first": norm_first if block_norm_first is None else block_norm_first}
    encoders = [copy_into_torch(nn.TransformerEncoderLayer(d, h, **options).to(dtype).train(), block)
                for block in model.encoder_layers]
    decoders = [copy_into_torch(nn.TransformerDecoderLayer(d, h, **options).to(dtype).train(), block)
                for block in model.decoder_layers]
    pe = model.pos_encoding.pe.to(dtype)

    def call(src, tgt):
        real = (src != pad)[:, None, None, :]  # (B, 1, 1, n_src), True = a real token
        # Masks as per-head attn masks, True = blocked (PyTorch's key padding masks would make
        # it import sympy for a shape check: a second of waiting, once).
        x = F.embedding(src, model.src_embed.weight) * scale + (pe[:n_s] if src_positions else 0)
        for layer in encoders:
            x = layer(x, src_mask=torch_mask(real if encoder_padding else None, B, h, n_s, n_s))
        if norm_first and "encoder" in final_norm:
            x = model.encoder_norm(x)
        ones = torch.ones(n_t, n_t, dtype=torch.bool)
        future = {"causal": ones.triu(1), "upper": ones.tril(-1), "none": None}[tgt_mask]  # True = blocked
        y = F.embedding(tgt, model.tgt_embed.weight) * scale + (pe[:n_t] if tgt_positions else 0)
        for layer in decoders:
            y = layer(y, x, tgt_mask=future,
                      memory_mask=torch_mask(real if cross_padding else None, B, h, n_t, n_s))
        if norm_first and "decoder" in final_norm:
            y = model.decoder_norm(y)
        logits = model.out(y)
        return x * real[:, 0, 0, :, None], logits.softmax(-1) if probabilities else logits
    return call


def _variants(model, spec, src, tgt) -> dict:
    def variant(**switch):  # built only when needed, to name a mistake
        return lambda: dict(zip(("memory", "logits"), torch_transformer(model, spec, **switch)(src, tgt)))

    return {NO_CAUSAL: variant(tgt_mask="none"), FUTURE_MASK: variant(tgt_mask="upper"),
            NO_PADDING: variant(encoder_padding=False, cross_padding=False),
            NO_ENCODER_PADDING: variant(encoder_padding=False),
            NO_CROSS_PADDING: variant(cross_padding=False),
            NO_FINAL_NORM: variant(final_norm=()), NO_ENCODER_NORM: variant(final_norm=("decoder",)),
            NO_DECODER_NORM: variant(final_norm=("encoder",)),
            BLOCK_NORM_FIRST: variant(block_norm_first=not spec[2]),
            BLOCK_ACTIVATION: variant(block_activation="relu"), PROBABILITIES: variant(probabilities=True),
            EMB_SCALE: variant(scale=math.sqrt(MODEL_DIMS[3])),
            NO_TGT_POSITIONS: variant(tgt_positions=False),
            NO_SRC_POSITIONS: variant(src_positions=False)}


@visible_check
def check_Transformer(Transformer) -> None:
    """Layout, then encode, decode and forward against PyTorch's layers holding the model's weights:
    post- and pre-norm, relu and gelu, source padding, another pad_id; every parameter learns."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    for seed, spec in enumerate(CASES):
        name, (n_enc, n_dec), norm_first, activation, pad, dtype = spec
        case = f"case '{name}'"
        model = call_learner("Transformer", case, Transformer, v_s, v_t, d_model=d, num_heads=h, d_ff=d_ff,
                             num_encoder_layers=n_enc, num_decoder_layers=n_dec, dropout=0.0,
                             activation=activation, norm_first=norm_first, max_len=MAX_LEN, pad_id=pad)
        if not isinstance(model, nn.Module):
            raise CheckFailure("Transformer(...) should create an nn.Module.")
        expect_layout(model, n_enc, n_dec, norm_first)
        seed_parameters(model, 1000 * seed)
        model = model.to(dtype).eval()
        src, tgt = _inputs(pad, 10 * seed)
        src_mask = (src != pad)[:, None, None, :]
        with torch.no_grad():
            memory = expect_tensor(call_learner("Transformer.encode", case, model.encode, src, src_mask),
                                   "Transformer.encode's result")
            expect_shape(memory, (B, n_s, d), "Transformer.encode's result", case)
            logits = call_learner("Transformer.decode", case, model.decode, tgt, memory, src_mask)
            expect_shape(logits, (B, n_t, v_t), "Transformer.decode's result", case)
            got = {"memory": memory * (src != pad)[..., None], "logits": logits}
            want = dict(zip(("memory", "logits"), torch_transformer(model, spec)(src, tgt)))
            compare_outputs(got, want, "Transformer", case,
                            against="nn.TransformerEncoderLayer and nn.TransformerDecoderLayer with the "
                                    "same weights",
                            variants=_variants(model, spec, src, tgt))
        whole = expect_tensor(call_learner("Transformer", case, model, src, tgt), "Transformer's output")
        if not close(whole, logits, *tolerance(dtype)):
            raise CheckFailure(
                f"Transformer: model(src, tgt) differs from model.decode(tgt, model.encode(src, src_mask), "
                f"src_mask) with src_mask = padding_mask(src, pad_id={pad}) in {case}. {FORWARD_HINT}")
        whole.sum().backward()
        silent = [n for n, p in model.named_parameters() if p.grad is None]
        if silent:
            raise CheckFailure(f"Transformer: {', '.join(silent[:3])} get no gradient from the logits "
                               f"in {case}: "
                               "that part of the model is never used.")
    passed("Transformer matches PyTorch's layers with the same weights: post- and pre-norm, padding, pad_id.")
