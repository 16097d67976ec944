"""Visible checks of 10.6 The encoder-decoder architecture.

References: ``nn.Transformer.generate_square_subsequent_mask`` for the causal mask;
``nn.TransformerDecoderLayer`` and a stack of ``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer`` holding the learner's weights (copied in) for the blocks
and the whole model, with the notebook's conventions around them (embeddings plus the
model's own positional table, not scaled; final LayerNorms only for pre-norm); a scripted
stand-in model for greedy decoding. Wrong variants: the same layers with other arguments
(a mask left out or inverted, ``norm_first`` flipped) or their sublayers rearranged.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.compare import Mistake, close, tolerance
from course.testing import (
    VisibleCheckFailure,
    check_close,
    check_outputs,
    check_shape,
    check_tensor,
    instant,
    passed,
    run_learner,
    seeded,
    with_gradients,
)
from course.visible.s10_1 import check_distinct
from course.visible.s10_5 import (
    block_parameter_names,
    check_block_structure,
    copy_into_torch,
    seed_parameters,
    torch_mask,
)


def _expect_bool(mask, what: str) -> torch.Tensor:
    check_tensor(mask, what)
    if mask.dtype != torch.bool:
        raise VisibleCheckFailure(f"{what} should be a bool tensor (True = may attend), not {mask.dtype}. "
                                  "Build it with a comparison or dtype=torch.bool.")
    return mask


# ---------------------------------------------------------------- causal_mask


@instant
def check_causal_mask(causal_mask) -> None:
    """A bool (n, n) mask, True on and below the diagonal, as PyTorch's (inverted) mask says."""
    for n in (5, 2, 7, 1):
        case = f"n={n}"
        mask = _expect_bool(run_learner("causal_mask", case, causal_mask, n), f"causal_mask({n})")
        check_shape(mask, (n, n), f"causal_mask({n})", case)
        theirs = nn.Transformer.generate_square_subsequent_mask(n) == 0  # PyTorch: 0 = may attend
        ones = torch.ones(n, n)
        mistakes = {
            "no_diagonal": Mistake("a mask without its diagonal (tril(diagonal=-1))", "A token may attend to "
                                   "itself: keep the diagonal, tril() with diagonal=0.",
                                   lambda ones=ones: ones.tril(-1)),
            "inverted": Mistake("the causal mask inverted (True above the diagonal)", "True means *may "
                                "attend*: query i may see keys 0..i. nn.Transformer's masks use the opposite "
                                "polarity.", lambda ones=ones: ones.triu(1)),
            "upper": Mistake("an upper-triangular mask (triu): every token sees the future, not the past",
                             "Use tril: row i (a query) is True in columns 0..i.",
                             lambda ones=ones: ones.triu()),
        }
        check_close(mask.double(), theirs.double(), f"causal_mask({n})", case,
                    against="nn.Transformer.generate_square_subsequent_mask(n) == 0",
                    mistakes={k: Mistake(m.description, m.hint, lambda m=m: m.run().double())
                              for k, m in mistakes.items()})
    mask = run_learner("causal_mask", "n=3, device='cpu'", causal_mask, 3, device=torch.device("cpu"))
    check_shape(_expect_bool(mask, "causal_mask(3, device=...)"), (3, 3), "causal_mask(3, device=...)")
    passed("causal_mask lets each position see itself and the positions before it.")


# ---------------------------------------------------------------- padding_mask

PADDING_CASES = [  # name, rows of token ids, pad_id
    ("B=2, n=5, padding at the end", [[5, 9, 4, 7, 0], [6, 8, 0, 0, 0]], 0),
    ("B=3, n=4, no padding", [[4, 5, 6, 7], [7, 6, 5, 4], [1, 2, 3, 9]], 0),
    ("pad_id=5 (and 0 is a real word)", [[0, 3, 8, 5, 5, 5], [7, 0, 1, 2, 9, 5], [4, 4, 0, 5, 5, 5]], 5),
    ("padding at the start", [[0, 0, 4, 5, 6], [0, 7, 8, 9, 3]], 0),
]
PADDING_SHAPE_HINT = ("The padding mask hides *keys*: it must broadcast against scores of shape "
                      "(B, h, n_q, n_k), so it has shape (B, 1, 1, n): one entry per key, the same for "
                      "every head and query.")


@instant
def check_padding_mask(padding_mask) -> None:
    """A bool (B, 1, 1, n) mask, True for real tokens, with any pad_id."""
    for case, rows, pad in PADDING_CASES:
        tokens = torch.tensor(rows)
        B, n = tokens.shape
        what = f"padding_mask(tokens, pad_id={pad})"
        mask = _expect_bool(run_learner("padding_mask", case, padding_mask, tokens, pad), what)
        if tuple(mask.shape) != (B, 1, 1, n):
            raise VisibleCheckFailure(f"{what} should have shape (B, 1, 1, n) = {(B, 1, 1, n)} in case "
                                      f"'{case}', but has shape {tuple(mask.shape)}. {PADDING_SHAPE_HINT}")
        real = ~(tokens == pad)  # (B, n): PyTorch's key_padding_mask is tokens == pad_id (True = ignore)
        mistakes = {
            "inverted": Mistake("the padding mask inverted (True at the padding)",
                                "True means *may attend*: True for real tokens.",
                                lambda tokens=tokens, pad=pad: (tokens == pad).double()),
            "pad_zero": Mistake("a mask that ignores pad_id and treats id 0 as the padding",
                                "Compare with the pad_id argument, not with 0.",
                                lambda tokens=tokens: (tokens != 0).double()),
        }
        check_close(mask[:, 0, 0, :].double(), real.double(), what, case,
                    against="True for every token that is not pad_id", mistakes=mistakes)
    passed("padding_mask hides the padding keys, for any pad_id, and broadcasts over heads and queries.")


# ---------------------------------------------------------------- DecoderBlock

DECODER_HOW = ("Create, in this order, self_attn and cross_attn (two MultiHeadAttention(d_model, "
               "num_heads)), ffn (a FeedForward(d_model, d_ff, activation, dropout)), norm1, norm2 and norm3 "
               "(three nn.LayerNorm(d_model)).")
DIMS = (2, 4, 5, 12, 3, 10)  # B, n_tgt, n_src, d_model, h, d_ff: every dimension differs
DECODER_CASES = [  # name, norm_first, activation, target mask, source padding, dropout, dtype
    ("post-norm, causal mask and source padding", False, "relu", "causal", True, 0.0, torch.float32),
    ("pre-norm, causal mask and source padding", True, "relu", "causal", True, 0.0, torch.float64),
    ("pre-norm, gelu, target padding too", True, "gelu", "causal+padding", True, 0.0, torch.float64),
    ("post-norm, gelu, no masks", False, "gelu", None, False, 0.0, torch.float64),
    ("dropout=0.1 in eval() mode", False, "relu", "causal", True, 0.1, torch.float64),
]


def _lengths_mask(B: int, n: int) -> torch.Tensor:
    """(B, 1, 1, n): sentence 0 padded by 2, the others by 1."""
    return (torch.arange(n) < torch.tensor([n - 2] + [n - 1] * (B - 1))[:, None])[:, None, None, :]


def decoder_masks(kind, source_padding):
    B, n_t, n_s = DIMS[:3]
    tgt_mask = None
    if kind is not None:
        tgt_mask = torch.ones(n_t, n_t, dtype=torch.bool).tril()
        if kind == "causal+padding":
            tgt_mask = _lengths_mask(B, n_t) & tgt_mask  # (B, 1, n_t, n_t)
    return tgt_mask, (_lengths_mask(B, n_s) if source_padding else None)


def _blocked(mask, n_q, n_k):
    """Our mask as PyTorch's (B*h, n_q, n_k), True = blocked."""
    B, h = DIMS[0], DIMS[4]
    return None if mask is None else ~mask.expand(B, h, n_q, n_k).reshape(B * h, n_q, n_k)


def _decoder_layer(module, spec, **changes):
    case, norm_first, activation, kind, source, dropout, dtype = spec
    B, n_t, n_s, d, h, d_ff = DIMS
    swap = changes.pop("swap", None)
    options = {"norm_first": norm_first, "activation": activation, **changes}
    layer = nn.TransformerDecoderLayer(d, h, d_ff, dropout=dropout, batch_first=True, **options).to(dtype)
    return copy_into_torch(layer, module, swap=swap).eval()


def _through_decoder(layer, *, use_tgt_mask=True, use_memory_mask=True):
    n_t, n_s = DIMS[1], DIMS[2]

    def call(x, memory, tgt_mask, memory_mask):
        return layer(x, memory, tgt_mask=_blocked(tgt_mask if use_tgt_mask else None, n_t, n_t),
                     memory_mask=_blocked(memory_mask if use_memory_mask else None, n_t, n_s))
    return call


def _rearranged_decoder(layer, norm_first, *, cross_from="memory", norm3="norm3", norm_memory=False,
                        cross_residual=True):
    """The layer's sublayers put together with one thing changed (see the keywords)."""
    n_t, n_s = DIMS[1], DIMS[2]

    def call(x, memory, tgt_mask, memory_mask):
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

        x = residual(x, attend_self, layer.norm1)
        x = residual(x, attend_cross, layer.norm2, keep=cross_residual)
        if norm3 == "none":
            return x + feed(x)
        return residual(x, feed, layer.norm3)
    return call


def _decoder_outputs(call, spec, seed):
    dtype = spec[-1]
    B, n_t, n_s, d, h, d_ff = DIMS
    x = seeded(B, n_t, d, seed=seed, dtype=dtype).requires_grad_()
    memory = seeded(B, n_s, d, seed=seed + 1, dtype=dtype).requires_grad_()
    tgt_mask, memory_mask = decoder_masks(spec[3], spec[4])
    return with_gradients(lambda: (call(x, memory, tgt_mask, memory_mask),), ("output",),
                          {"x": x, "memory": memory}, seed)


def decoder_mistakes(module, spec, seed) -> dict[str, Mistake]:
    norm_first = spec[1]

    def layer(**options):  # built only when needed, to name a mistake
        mask_use = {k: options.pop(k) for k in ("use_tgt_mask", "use_memory_mask") if k in options}
        return lambda: _decoder_outputs(_through_decoder(_decoder_layer(module, spec, **options), **mask_use),
                                        spec, seed)

    def rearranged(**switch):
        return lambda: _decoder_outputs(
            _rearranged_decoder(_decoder_layer(module, spec), norm_first, **switch), spec, seed)

    return {
        "cross_from_x": Mistake("cross-attention whose keys and values come from x instead of memory",
                                "Cross-attention reads the source: self.cross_attn(x, memory, memory, "
                                "memory_mask), queries from the decoder, keys and values from the encoder.",
                                rearranged(cross_from="x")),
        "no_norm3": Mistake("a missing third LayerNorm around the feed-forward network", "Each of the three "
                            "sublayers has its own LayerNorm: norm1 with the self-attention, norm2 with the "
                            "cross-attention, norm3 with the feed-forward network.",
                            rearranged(norm3="none")),
        "norm2_twice": Mistake("norm2 used for the feed-forward sublayer too (norm3 unused)",
                               "The feed-forward sublayer uses self.norm3.", layer(swap={"norm3": "norm2"})),
        "no_tgt_mask": Mistake("self-attention without tgt_mask", "Pass tgt_mask to the self-attention, or "
                               "every target token sees the future.", layer(use_tgt_mask=False)),
        "no_memory_mask": Mistake("cross-attention without memory_mask", "Pass memory_mask to the "
                                  "cross-attention, or the decoder attends to source padding.",
                                  layer(use_memory_mask=False)),
        "norm_memory": Mistake("pre-norm that also normalises memory with norm2", "In pre-norm only the "
                               "decoder's stream is normalised: self.cross_attn(self.norm2(x), memory, "
                               "memory, memory_mask).", rearranged(norm_memory=True)),
        "no_cross_residual": Mistake("a cross-attention sublayer without its residual connection",
                                     "Add the cross-attention's output to x: x + cross_attn(...) (post-norm: "
                                     "inside norm2).", rearranged(cross_residual=False)),
        "relu": Mistake("ReLU although activation='gelu'", "Pass activation on to FeedForward.",
                        layer(activation="relu")),
        "norm_first": Mistake(f"{'post' if norm_first else 'pre'}-norm although norm_first={norm_first}",
                              "With norm_first=True each sublayer is x = x + sublayer(norm(x)); with False, "
                              "x = norm(x + sublayer(x)).", layer(norm_first=not norm_first)),
    }


def _check_no_dropout_in_eval(module, spec, seed) -> None:
    """In eval() mode dropout is off: two runs give the same output."""
    def call(x, memory, tgt_mask, memory_mask):
        return module(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask)

    first, second = (_decoder_outputs(call, spec, seed)["output"] for _ in range(2))
    if not torch.equal(first, second):
        raise VisibleCheckFailure(
            f"DecoderBlock(..., dropout={spec[5]}) gives different outputs for the same input in eval() "
            "mode: dropout is still on. Use nn.Dropout modules (off in eval mode), not "
            "F.dropout(..., training=True) or a module you switch to train() yourself.")


@instant
def check_DecoderBlock(DecoderBlock) -> None:
    """Against nn.TransformerDecoderLayer with the same weights: post- and pre-norm, masks, gelu, dropout."""
    B, n_t, n_s, d, h, d_ff = DIMS
    for seed, spec in enumerate(DECODER_CASES):
        case, norm_first, activation, kind, source, dropout, dtype = spec
        module = run_learner("DecoderBlock", case, DecoderBlock, d, h, d_ff, dropout=dropout,
                             activation=activation, norm_first=norm_first)
        check_block_structure("DecoderBlock", module, ("self_attn", "cross_attn"),
                              ("norm1", "norm2", "norm3"), DECODER_HOW)
        seed_parameters(module, 100 * seed)
        module = module.to(dtype).eval()
        if dropout:
            _check_no_dropout_in_eval(module, spec, seed)

        def learner(x, memory, tgt_mask, memory_mask, case=case, module=module):
            out = run_learner("DecoderBlock", case, module, x, memory, tgt_mask=tgt_mask,
                              memory_mask=memory_mask)
            out = check_tensor(out, "DecoderBlock's output")
            check_shape(out, (B, n_t, d), "DecoderBlock's output (the shape of x, (B, n_tgt, d_model))", case)
            return out

        check_outputs(_decoder_outputs(learner, spec, seed),
                      _decoder_outputs(_through_decoder(_decoder_layer(module, spec)), spec, seed),
                      "DecoderBlock", case, against="nn.TransformerDecoderLayer with the same weights",
                      mistakes=decoder_mistakes(module, spec, seed))
    passed("DecoderBlock matches nn.TransformerDecoderLayer: post- and pre-norm, both masks, gelu, dropout.")


# ---------------------------------------------------------------- Transformer

MODEL_DIMS = (2, 6, 5, 12, 3, 10, 11, 13)  # B, n_src, n_tgt, d_model, h, d_ff, src and tgt vocabularies
MAX_LEN = 16
TRANSFORMER_HOW = (
    "Follow the notebook's table: src_embed and tgt_embed, two nn.Embedding(vocab size, d_model); "
    "pos_encoding, a PositionalEncoding(d_model, max_len, dropout); encoder_layers and decoder_layers, "
    "nn.ModuleLists of num_encoder_layers TransformerBlocks and num_decoder_layers DecoderBlocks; "
    "encoder_norm and decoder_norm, nn.LayerNorm(d_model) when norm_first=True, else nn.Identity(); out, "
    "an nn.Linear(d_model, tgt_vocab_size).")
TRANSFORMER_CASES = [  # name, (encoder, decoder blocks), norm_first, activation, pad_id, dtype
    ("post-norm, 2 encoder blocks and 1 decoder block, source padding", (2, 1), False, "relu", 0,
     torch.float64),
    ("pre-norm (with the final LayerNorms), gelu, 1 + 2 blocks", (1, 2), True, "gelu", 0, torch.float64),
    ("pad_id=3, post-norm, 1 + 1 blocks, float32", (1, 1), False, "relu", 3, torch.float32),
]


def _token_ids(B, n, vocab, pad, seed):
    """Random ids in [0, vocab) that are never pad."""
    ids = torch.randint(0, vocab - 1, (B, n), generator=torch.Generator().manual_seed(seed))
    return ids + (ids >= pad).long()


def transformer_inputs(pad, seed):
    """src (B, n_src) with padding at the end of every row but one, and tgt (B, n_tgt)."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    src = _token_ids(B, n_s, v_s, pad, seed)
    src = src.masked_fill(~_lengths_mask(B, n_s)[:, 0, 0, :], pad)
    src[-1] = _token_ids(1, n_s, v_s, pad, seed + 1)[0]  # the last sentence has no padding
    return src, _token_ids(B, n_t, v_t, pad, seed + 2)


def check_model_layout(model: nn.Module, n_enc: int, n_dec: int, norm_first: bool) -> None:
    """The attributes of the notebook's table, distinct, with the contract's parameter names."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    kinds = {"src_embed": nn.Embedding, "tgt_embed": nn.Embedding, "pos_encoding": nn.Module,
             "encoder_layers": nn.ModuleList, "decoder_layers": nn.ModuleList,
             "encoder_norm": nn.LayerNorm if norm_first else nn.Identity,
             "decoder_norm": nn.LayerNorm if norm_first else nn.Identity, "out": nn.Linear}
    for name, kind in kinds.items():
        if not isinstance(getattr(model, name, None), kind):
            raise VisibleCheckFailure(f"Transformer(..., norm_first={norm_first}) needs self.{name} = "
                                      f"{kind.__name__}(...). {TRANSFORMER_HOW}")
    check_distinct(model, "Transformer", ("src_embed", "tgt_embed"), TRANSFORMER_HOW)
    for stack, count in (("encoder_layers", n_enc), ("decoder_layers", n_dec)):
        blocks = getattr(model, stack)
        if len(blocks) != count:
            raise VisibleCheckFailure(f"Transformer(..., num_encoder_layers={n_enc}, num_decoder_layers="
                                      f"{n_dec}) has {len(blocks)} blocks in {stack}, not {count}. "
                                      + TRANSFORMER_HOW)
        if len({id(b) for b in blocks}) != len(blocks):
            raise VisibleCheckFailure(f"Transformer.{stack} holds one block several times (the same "
                                      "object): every layer needs its own block, created in a loop. "
                                      + TRANSFORMER_HOW)
    pe = getattr(model.pos_encoding, "pe", None)
    if not isinstance(pe, torch.Tensor) or tuple(pe.shape) != (MAX_LEN, d):
        raise VisibleCheckFailure(f"Transformer(..., max_len={MAX_LEN}) needs self.pos_encoding = "
                                  "PositionalEncoding(d_model, max_len, dropout), with its table pe of "
                                  f"shape ({MAX_LEN}, {d}).")
    want = {"src_embed.weight", "tgt_embed.weight", "out.weight", "out.bias"}
    want |= {f"encoder_layers.{i}.{k}" for i in range(n_enc) for k in block_parameter_names(
        ("self_attn",), ("norm1", "norm2"))}
    want |= {f"decoder_layers.{i}.{k}" for i in range(n_dec) for k in block_parameter_names(
        ("self_attn", "cross_attn"), ("norm1", "norm2", "norm3"))}
    if norm_first:
        want |= {f"{n}.{k}" for n in ("encoder_norm", "decoder_norm") for k in ("weight", "bias")}
    have = set(dict(model.named_parameters()))
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        detail = "; ".join(p for p in (f"missing {', '.join(missing[:4])}" if missing else "",
                                       f"unexpected {', '.join(extra[:4])}" if extra else "") if p)
        raise VisibleCheckFailure(f"Transformer has the wrong parameters ({detail}). {TRANSFORMER_HOW}")


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


PADDING_HINT = ("Pass src_mask = padding_mask(src, pad_id) to every encoder block and, as memory_mask, to "
                "every decoder block.")


def transformer_mistakes(model, spec, src, tgt) -> dict[str, Mistake]:
    def variant(**switch):  # built only when needed, to name a mistake
        return lambda: dict(zip(("memory", "logits"), torch_transformer(model, spec, **switch)(src, tgt)))

    d = MODEL_DIMS[3]
    return {
        "no_causal": Mistake("a decoder without the causal mask", "In decode, build causal_mask(n_tgt, "
                             "device=tgt.device) and pass it as tgt_mask to every DecoderBlock.",
                             variant(tgt_mask="none")),
        "future_mask": Mistake("a decoder whose mask shows each position the future instead of the past",
                               "The decoder's mask is causal_mask(n_tgt): True on and below the diagonal.",
                               variant(tgt_mask="upper")),
        "no_padding": Mistake("a model that ignores the source padding", PADDING_HINT,
                              variant(encoder_padding=False, cross_padding=False)),
        "no_encoder_padding": Mistake("encoder blocks without the source padding mask", PADDING_HINT,
                                      variant(encoder_padding=False)),
        "no_cross_padding": Mistake("decoder blocks without the source padding mask (memory_mask)",
                                    PADDING_HINT, variant(cross_padding=False)),
        "no_final_norm": Mistake("pre-norm stacks without their final LayerNorms", "With norm_first=True "
                                 "apply self.encoder_norm to the encoder's output and self.decoder_norm "
                                 "before self.out.", variant(final_norm=())),
        "no_encoder_norm": Mistake("a pre-norm encoder without its final LayerNorm", "With norm_first=True "
                                   "encode ends with self.encoder_norm.", variant(final_norm=("decoder",))),
        "no_decoder_norm": Mistake("a pre-norm decoder without its final LayerNorm", "With norm_first=True "
                                   "decode applies self.decoder_norm before self.out.",
                                   variant(final_norm=("encoder",))),
        "block_norm_first": Mistake("blocks that do not get norm_first", "Pass norm_first (and dropout, "
                                    "activation) on to every TransformerBlock and DecoderBlock.",
                                    variant(block_norm_first=not spec[2])),
        "block_activation": Mistake("blocks that do not get the activation", "Pass activation on to every "
                                    "TransformerBlock and DecoderBlock.", variant(block_activation="relu")),
        "probabilities": Mistake("probabilities (a softmax) returned instead of logits", "decode returns "
                                 "self.out(...) as it is: the loss and greedy decoding take logits.",
                                 variant(probabilities=True)),
        "emb_scale": Mistake("embeddings multiplied by sqrt(d_model)", "This notebook adds the positional "
                             "encoding to the embeddings as they are (see the text above the exercise).",
                             variant(scale=math.sqrt(d))),
        "no_tgt_positions": Mistake("target embeddings without the positional encoding",
                                    "Apply self.pos_encoding to the target embeddings too.",
                                    variant(tgt_positions=False)),
        "no_src_positions": Mistake("source embeddings without the positional encoding",
                                    "Apply self.pos_encoding to the source embeddings too.",
                                    variant(src_positions=False)),
    }


@instant
def check_Transformer(Transformer) -> None:
    """Layout, then encode, decode and forward against PyTorch's layers holding the model's weights:
    post- and pre-norm, relu and gelu, source padding, another pad_id; every parameter learns."""
    B, n_s, n_t, d, h, d_ff, v_s, v_t = MODEL_DIMS
    for seed, spec in enumerate(TRANSFORMER_CASES):
        case, (n_enc, n_dec), norm_first, activation, pad, dtype = spec
        model = run_learner("Transformer", case, Transformer, v_s, v_t, d_model=d, num_heads=h, d_ff=d_ff,
                            num_encoder_layers=n_enc, num_decoder_layers=n_dec, dropout=0.0,
                            activation=activation, norm_first=norm_first, max_len=MAX_LEN, pad_id=pad)
        if not isinstance(model, nn.Module):
            raise VisibleCheckFailure("Transformer(...) should create an nn.Module.")
        check_model_layout(model, n_enc, n_dec, norm_first)
        seed_parameters(model, 1000 * seed)
        model = model.to(dtype).eval()
        src, tgt = transformer_inputs(pad, 10 * seed)
        src_mask = (src != pad)[:, None, None, :]
        with torch.no_grad():
            memory = check_tensor(run_learner("Transformer.encode", case, model.encode, src, src_mask),
                                  "Transformer.encode's result")
            check_shape(memory, (B, n_s, d), "Transformer.encode's result", case)
            logits = run_learner("Transformer.decode", case, model.decode, tgt, memory, src_mask)
            check_tensor(logits, "Transformer.decode's result")
            check_shape(logits, (B, n_t, v_t), "Transformer.decode's result", case)
            got = {"memory": memory * (src != pad)[..., None], "logits": logits}
            want = dict(zip(("memory", "logits"), torch_transformer(model, spec)(src, tgt)))
            check_outputs(got, want, "Transformer", case,
                          against="nn.TransformerEncoderLayer and nn.TransformerDecoderLayer with the "
                          "same weights",
                          mistakes=transformer_mistakes(model, spec, src, tgt))
        whole = check_tensor(run_learner("Transformer", case, model, src, tgt), "Transformer's output")
        if not close(whole, logits, *tolerance(dtype)):
            raise VisibleCheckFailure(
                f"Transformer: model(src, tgt) differs from model.decode(tgt, model.encode(src, src_mask), "
                f"src_mask) with src_mask = padding_mask(src, pad_id={pad}) in case '{case}'. forward should "
                "build padding_mask(src, self.pad_id) and run encode, then decode.")
        whole.sum().backward()
        silent = [n for n, p in model.named_parameters() if p.grad is None]
        if silent:
            raise VisibleCheckFailure(f"Transformer: {', '.join(silent[:3])} get no gradient from the logits "
                                      f"in case '{case}': that part of the model is never used.")
    passed("Transformer matches PyTorch's layers with the same weights: post- and pre-norm, padding, pad_id.")


# ---------------------------------------------------------------- greedy_decode

OFF_SCRIPT = 15  # the stand-in's prediction after a prefix its script does not contain
STUB_VOCAB = 16
GREEDY_CASES = [  # name, scripts (one per sentence), bos, eos, max_len
    ("one sentence, <eos> after three words", [[1, 7, 8, 9, 2]], 1, 2, 10),
    ("three sentences of different lengths", [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]],
     1, 2, 12),
    ("max_len reached before <eos>", [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], 1, 2, 5),
    ("bos_id=7, eos_id=4", [[7, 5, 9, 5, 4], [7, 4]], 7, 4, 8),
    ("an empty translation", [[1, 2]], 1, 2, 6),
]


class ScriptedModel(nn.Module):
    """A stand-in for a trained Transformer with the notebook's interface (encode, decode, pad_id).

    Sentence b has a script; after a decoder input that is a prefix of its script, the model
    predicts the script's next token, and ``OFF_SCRIPT`` after anything else. The memory
    carries each sentence's key (its first source token), so the script follows the
    sentence whatever order or subset of rows is decoded.
    """

    def __init__(self, scripts: dict[int, list[int]], pad_id: int = 0):
        super().__init__()
        self.scripts, self.pad_id = scripts, pad_id
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


def _why(have: list[int], want: list[int], i: int) -> str:
    """What the learner's row says about the loop, from the first wrong token i."""
    generated = have[1:i + 1]
    if len(generated) > 1 and all(t == want[1] for t in generated):
        return ("It keeps predicting the same token: at each step feed everything generated so far "
                "(starting with bos_id) to the decoder, take the logits at the last position, [:, -1], "
                "and append their argmax.")
    if have[i] == OFF_SCRIPT:
        return ("The token does not follow from the tokens before it: at each step the decoder input must "
                "be the whole output so far, bos_id first, and the next token is the argmax of the logits at "
                "its last position.")
    return "Take the argmax over the vocabulary (dim=-1) of the logits at the last position."


@instant
def check_greedy_decode(greedy_decode) -> None:
    """On a scripted stand-in model: bos first, one greedy choice per step, stops at eos or max_len."""
    for case, scripts, bos, eos, max_len in GREEDY_CASES:
        keyed = {10 + b: s for b, s in enumerate(scripts)}
        src = torch.tensor([[key, 5, 6, 7][: 4 - b % 2] + [0] * (b % 2) for b, key in enumerate(keyed)])
        with torch.no_grad():
            out = run_learner("greedy_decode", case, greedy_decode, ScriptedModel(keyed), src, bos, eos,
                              max_len)
        tokens = check_tensor(out, "greedy_decode's result")
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise VisibleCheckFailure("greedy_decode should return token ids as a LongTensor, not "
                                      f"{tokens.dtype} (create the output with dtype=torch.long).")
        if tokens.dim() != 2 or tokens.shape[0] != len(scripts):
            raise VisibleCheckFailure(f"greedy_decode should return shape (B, n) = ({len(scripts)}, n), one "
                                      f"row per source sentence, but returned {tuple(tokens.shape)} in "
                                      f"case '{case}'.")
        rows = tokens.tolist()
        want = [s[:max_len] for s in scripts]
        if not rows[0] or any(r[0] != bos for r in rows):
            raise VisibleCheckFailure(f"greedy_decode should return sequences that start with bos_id={bos} "
                                      f"in case '{case}': start the output with a column of bos_id.")
        if len(rows[0]) > max_len:
            raise VisibleCheckFailure(f"greedy_decode returned {len(rows[0])} tokens per sentence with "
                                      f"max_len={max_len} in case '{case}': max_len counts every token, "
                                      "<bos> included.")
        for b, (have, script) in enumerate(zip(rows, want)):
            for i in range(1, min(len(have), len(script))):
                if have[i] != script[i]:
                    raise VisibleCheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy "
                                              f"choice in case '{case}'. {_why(have, script, i)}")
        longest = max(len(s) for s in want)
        if len(rows[0]) > longest:
            raise VisibleCheckFailure(
                f"greedy_decode did not stop in case '{case}': every sentence had produced eos_id={eos} "
                f"after {longest} tokens, but the output has {len(rows[0])}. Stop as soon as every sentence "
                "in the batch has produced eos_id.")
        if len(rows[0]) < longest:
            raise VisibleCheckFailure(
                f"greedy_decode stopped after {len(rows[0])} tokens in case '{case}', before every sentence "
                f"had produced eos_id={eos} (or max_len={max_len} was reached). Keep going until all "
                "sentences of the batch are finished.")
    passed("greedy_decode feeds its own words back, stops when every sentence has eos_id, respects max_len.")
