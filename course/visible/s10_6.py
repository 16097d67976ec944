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

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import expect_distinct as check_distinct
from course.compare import Mistake, close, close_score, tolerance
from course.decoding import positions_per_call
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
from course.translation import BOS, EOS, PAD
from course.visible.s10_5 import (
    ACTIVATIONS,
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


def check_token_ids(out, what: str, sentences: int, bos: int, max_len: int, case: str) -> list[list[int]]:
    """A decoder's output as rows of ids, after the checks every decoding exercise shares: a
    tensor of integer ids, shape (sentences, n), every row starting with bos, at most max_len
    tokens."""
    tokens = check_tensor(out, what)
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise VisibleCheckFailure(f"{what} should be token ids, a LongTensor (dtype=torch.long), not "
                                  f"{tokens.dtype}, in case '{case}': create the output with "
                                  "dtype=torch.long.")
    if tokens.dim() != 2 or tokens.shape[0] != sentences:
        raise VisibleCheckFailure(f"{what} should have shape ({sentences}, n), one row per source sentence, "
                                  f"but has shape {tuple(tokens.shape)} in case '{case}'.")
    rows = tokens.tolist()
    if tokens.shape[1] == 0 or any(row[0] != bos for row in rows):
        raise VisibleCheckFailure(f"{what} should hold sequences that start with bos_id={bos} in case "
                                  f"'{case}': start the output with a column of bos_id.")
    if tokens.shape[1] > max_len:
        raise VisibleCheckFailure(f"{what} has {tokens.shape[1]} tokens per sentence with max_len={max_len} "
                                  f"in case '{case}': max_len counts every token, <bos> included.")
    return rows


@instant
def check_greedy_decode(greedy_decode) -> None:
    """On a scripted stand-in model: bos first, one greedy choice per step, stops at eos or max_len."""
    for case, scripts, bos, eos, max_len in GREEDY_CASES:
        keyed = {10 + b: s for b, s in enumerate(scripts)}
        src = torch.tensor([[key, 5, 6, 7][: 4 - b % 2] + [0] * (b % 2) for b, key in enumerate(keyed)])
        with torch.no_grad():
            out = run_learner("greedy_decode", case, greedy_decode, ScriptedModel(keyed), src, bos, eos,
                              max_len)
        rows = check_token_ids(out, "greedy_decode's result", len(scripts), bos, max_len, case)
        want = [s[:max_len] for s in scripts]
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


# ---------------------------------------------------------------- greedy_decode_cached

STAND_IN_DIMS = (12, 3, 10, 11, 13)  # d_model, h, d_ff, source and target vocabularies
STAND_IN_MAX_LEN = 16  # rows of the stand-in's positional table
CACHED_CASES = [  # name, (encoder, decoder blocks), norm_first, activation, pad_id, pads per sentence,
    # n_src, bos, eos, max_len, seed, dtype: sentences that end at different steps
    ("post-norm, 2 + 2 blocks, 3 sentences with padding", (2, 2), False, "relu", 0, (0, 2, 1), 6, 1, 8, 10,
     15, torch.float64),
    ("pre-norm, gelu, 1 + 2 blocks, max_len reached", (1, 2), True, "gelu", 0, (1, 0), 5, 1, 6, 8, 6,
     torch.float64),
    ("pad_id=3, bos_id=5, post-norm, 2 + 1 blocks, float32", (2, 1), False, "relu", 3, (2, 0), 6, 5, 6, 9, 39,
     torch.float32),
]
CACHED_HOW = ("The check runs greedy_decode_cached on a stand-in model with the notebook's layout "
              "(model.encode, tgt_embed, pos_encoding.pe, decoder_layers with self_attn, cross_attn, ffn, "
              "norm1, norm2, norm3 and norm_first, decoder_norm, out, pad_id): keep your helpers as "
              "functions that take these parts, not as new methods of your classes.")


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
        """PyTorch's layer with this block's weights (``norm_first`` overrides the block's)."""
        d, d_ff = self.norm1.normalized_shape[0], self.ffn.linear1.out_features
        kind = nn.TransformerDecoderLayer if hasattr(self, "cross_attn") else nn.TransformerEncoderLayer
        layer = kind(d, self.self_attn.num_heads, d_ff, dropout=0.0, activation=self.activation,
                     batch_first=True, norm_first=self.norm_first if norm_first is None else norm_first)
        return copy_into_torch(layer.to(self.norm1.weight.dtype), self).eval()

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
    seen = torch.ones(n, n, dtype=torch.bool).tril()  # True = may attend: the causal mask ...
    if self_mask == "own":
        seen = torch.eye(n, dtype=torch.bool)  # ... or each position itself only
    y = model.tgt_embed(tgt) + rows
    for stand_in in model.decoder_layers:
        heads = stand_in.self_attn.num_heads
        y = stand_in.as_torch_layer(norm_first)(
            y, memory, tgt_mask=torch_mask(seen, B, heads, n, n),
            memory_mask=torch_mask(src_mask if memory_mask else None, B, heads, n, n_src))
    return model.out(model.decoder_norm(y) if decoder_norm else y)


NEWEST = ("The newest token is at position t = (tokens so far) - 1: add pe[t] (for example "
          "model.pos_encoding.pe[ys.shape[1] - 1]) to its embedding.")
CACHED_MISTAKES = {  # name: (description, hint, switches of teacher_forced)
    "position_zero": ("every new token embedded at position 0", NEWEST, {"position": "zero"}),
    "position_next": ("every new token embedded one position too far", NEWEST, {"position": "next"}),
    "no_self_cache": ("self-attention that sees only the newest position",
                      "Append the newest key and value to the block's cache, then let the newest query "
                      "attend to all the cached keys: every earlier position, and itself.",
                      {"self_mask": "own"}),
    "no_memory_mask": ("cross-attention without the source padding mask",
                       "Pass src_mask (padding_mask(src, model.pad_id)) to every cross-attention, as decode "
                       "does.", {"memory_mask": False}),
    "no_decoder_norm": ("decoder_norm skipped before the output layer",
                        "Apply model.decoder_norm before model.out, as decode does (it is a LayerNorm when "
                        "norm_first=True).", {"decoder_norm": False}),
    "always_post": ("post-norm sublayers although the blocks are pre-norm",
                    "Follow block.norm_first: x + sublayer(norm(x)) when True, norm(x + sublayer(x)) when "
                    "False.", {"norm_first": False}),
}


def first_non_greedy(ids: list[list[int]], logits: torch.Tensor, eos: int) -> tuple[int, int] | None:
    """The first (sentence, step) whose token is not the greedy choice of ``logits`` (B, n - 1,
    vocab) at the step before (a token within rounding of the best counts as a choice); what
    follows a sentence's eos_id is not looked at. None: every token is a greedy choice."""
    rtol, atol = tolerance(logits.dtype)
    for b, row in enumerate(ids):
        for t in range(1, len(row)):
            scores = logits[b, t - 1]
            best = float(scores.max())
            if not 0 <= row[t] < len(scores) or float(scores[row[t]]) < best - atol - rtol * abs(best):
                return b, t
            if row[t] == eos:
                break
    return None


def greedy_length(ids: list[list[int]], eos: int, max_len: int) -> int:
    """How many tokens greedy decoding returns with these choices: up to the step at which the
    last sentence produced eos_id, or max_len."""
    ends = [next((t for t in range(1, len(row)) if row[t] == eos), None) for row in ids]
    return max_len if None in ends else min(max_len, max(ends) + 1)


@contextlib.contextmanager
def _counting(model: nn.Module):
    """Positions per call (course.decoding.positions_per_call) of the stand-in's encoder blocks,
    of every layer of its decoder blocks, and of their cross-attention w_k and w_v, apart."""
    cross = ("cross_attn.w_k", "cross_attn.w_v")
    with contextlib.ExitStack() as stack:
        def watch(modules):
            return [stack.enter_context(positions_per_call(module)) for module in modules]

        yield {"encoder": watch(model.encoder_layers),
               "decoder": watch(m for block in model.decoder_layers for name, m in block.named_modules()
                                if name not in cross),
               "cross": watch(block.get_submodule(name) for block in model.decoder_layers for name in cross)}


def _decoded_ids(greedy_decode_cached, model, src, bos, eos, max_len, case):
    """The learner's ids as a tensor and as rows, after the checks of check_token_ids."""
    try:
        out = run_learner("greedy_decode_cached", case, greedy_decode_cached, model, src, bos, eos, max_len)
    except VisibleCheckFailure as failure:
        if "has no attribute" not in str(failure):
            raise
        raise VisibleCheckFailure(f"{failure}\n{CACHED_HOW}") from None
    ids = check_token_ids(out, "greedy_decode_cached's result", src.shape[0], bos, max_len, case)
    return out, ids


def _cached_ids_diagnosis(model, tokens, ids, memory, src_mask, eos, max_len) -> str:
    """The known mistake whose greedy choices the learner's ids are, or where to look."""
    context = tokens[:, :-1].to(memory.device)
    for description, hint, switch in CACHED_MISTAKES.values():
        logits = teacher_forced(model, context, memory, src_mask, **switch)
        if first_non_greedy(ids, logits, eos) is None and len(ids[0]) == greedy_length(ids, eos, max_len):
            return f"This looks like {description}. {hint}"
    return ""


@instant
def check_greedy_decode_cached(greedy_decode_cached) -> None:
    """On stand-in models with the notebook's layout: every token the greedy choice of the full
    decoder (checked in one teacher-forced pass of PyTorch's layers), the right length, the
    encoder run once, one new position per step, the cross-attention keys computed once."""
    d, h, d_ff, v_s, v_t = STAND_IN_DIMS
    for spec in CACHED_CASES:
        case, layers, norm_first, activation, pad, short, n_src, bos, eos, max_len, seed, dtype = spec
        model = StandInTranslator(layers, norm_first, activation, pad, seed, dtype)
        src = torch.randint(0, v_s - 1, (len(short), n_src), generator=torch.Generator().manual_seed(seed))
        src = src + (src >= pad).long()  # never pad ...
        for b, pads in enumerate(short):  # ... but at the end of the shorter sentences
            src[b, n_src - pads:] = pad
        with torch.no_grad(), _counting(model) as counts:
            tokens, ids = _decoded_ids(greedy_decode_cached, model, src, bos, eos, max_len, case)
        with torch.no_grad():
            src_mask = (src != pad)[:, None, None, :]
            memory = model.encode(src, src_mask)
            logits = teacher_forced(model, tokens[:, :-1], memory, src_mask)  # (B, n - 1, vocab)
        wrong = first_non_greedy(ids, logits, eos)
        if wrong is not None:
            b, t = wrong
            with torch.no_grad():
                diagnosis = _cached_ids_diagnosis(model, tokens, ids, memory, src_mask, eos, max_len)
            diagnosis = diagnosis or (
                "Already the first token: check the first step (the embedding of bos_id plus pe[0], the "
                "cross-attention with src_mask, block.norm_first, model.decoder_norm, one cache per block)."
                if t == 1 else
                "The first tokens agree, later ones do not: the newest token is at position t = "
                "ys.shape[1] - 1, and its query attends to the cached keys of every earlier position and "
                "to its own (append first, then attend); each block keeps its own cache.")
            raise VisibleCheckFailure(f"greedy_decode_cached: token {t} of sentence {b} is not "
                                      f"greedy_decode's in case '{case}' (the greedy choice of model.decode "
                                      f"on the tokens before it).\n{diagnosis}")
        want = greedy_length(ids, eos, max_len)
        if len(ids[0]) != want:
            raise VisibleCheckFailure(
                f"greedy_decode_cached returned {len(ids[0])} tokens per sentence in case '{case}', greedy "
                f"decoding {want}: stop when every sentence has produced eos_id={eos} or the output has "
                "max_len tokens, as greedy_decode does.")
        _check_counts(counts, len(short), n_src, case)
    passed("greedy_decode_cached gives greedy_decode's ids, runs the encoder once, caches keys and values.")


def _check_counts(counts: dict, B: int, n_src: int, case: str) -> None:
    """One encoder run, one new position per call after the first step, cross keys once."""
    runs = max(len(calls) for calls in counts["encoder"])
    if runs != 1:
        raise VisibleCheckFailure(f"greedy_decode_cached ran the encoder {runs} times in case '{case}': run "
                                  "model.encode(src, src_mask) once, before the loop, and keep its output.")
    most = max((max(calls, default=0) for calls in counts["decoder"]), default=0)
    if most == 0:
        raise VisibleCheckFailure(
            f"greedy_decode_cached never called the decoder blocks' layers in case '{case}' "
            "(block.self_attn.w_q(...), block.ffn(...), block.norm1(...)): call them as modules, not through "
            "their weights. The check counts the positions each layer processes.")
    if most > B:
        raise VisibleCheckFailure(
            f"greedy_decode_cached: one call of a decoder layer processed {most} positions in case "
            f"'{case}', a batch of {B} sentences. After the first step each decoder block should process "
            "only the newest position of each sentence and read the keys and values of the earlier positions "
            "from its cache.")
    cross = max(sum(calls) for calls in counts["cross"])
    if cross > B * n_src:
        raise VisibleCheckFailure(
            f"greedy_decode_cached computed the cross-attention keys and values {cross // (B * n_src)} times "
            f"in case '{case}': they depend only on the memory, so compute them once per block, before the "
            "loop (block.cross_attn.w_k(memory), block.cross_attn.w_v(memory)).")


# ---------------------------------------------------------------- beam_search

A, B_, C, D = 3, 4, 5, 6  # words of the scripted tables (pad 0, <bos> 1, <eos> 2)
TABLES = {  # prefix (the words after <bos>) -> next-word probabilities; <eos> after any other prefix
    "greedy misses": {(): {A: 0.5, B_: 0.4, EOS: 0.1}, (A,): {A: 0.4, B_: 0.3, EOS: 0.3},
                      (B_,): {EOS: 0.9, A: 0.05, B_: 0.05}},
    "refill": {(): {A: 0.66, EOS: 0.25, B_: 0.09}, (A,): {C: 0.5, B_: 0.48, EOS: 0.02},
               (A, B_): {EOS: 0.95, A: 0.05}, (A, C): {EOS: 0.1, A: 0.31, B_: 0.3, C: 0.29}},
    "short wins": {(): {A: 0.55, EOS: 0.45}, (A,): {B_: 0.9, EOS: 0.1}, (A, B_): {C: 0.9, EOS: 0.1},
                   (A, B_, C): {EOS: 0.9, A: 0.1}},
    "kept finished": {(): {A: 0.7, EOS: 0.3}, (A,): {A: 0.51, B_: 0.49}, (A, A): {C: 0.52, D: 0.48},
                      (A, B_): {C: 0.53, D: 0.47}},
}
BEAM_CASES = [  # name, table, max_len, beam_size, the best hypothesis and its probability, what known
    # mistakes return instead (the course's tests check them against the graded search; a max_len
    # counted without <bos> shows as too many tokens)
    ("beam_size=2 finds <bos> 4 <eos> (0.4 · 0.9 = 0.36), which greedy decoding misses", "greedy misses",
     6, 2, ([BOS, B_, EOS], 0.4 * 0.9),
     {"greedy": [BOS, A, A, EOS], "drop_finished": [BOS, A, A, PAD, PAD, PAD]}),
    ("beam_size=1 is greedy decoding: <bos> 3 3 <eos> (0.5 · 0.4 = 0.2)", "greedy misses", 6, 1,
     ([BOS, A, A, EOS], 0.5 * 0.4), {}),
    ("max_len=2: <bos> and one word", "greedy misses", 2, 2, ([BOS, A], 0.5), {}),
    ("the beam refills after <eos>: <bos> 3 4 <eos> (0.66 · 0.48 · 0.95) beats <bos> <eos> (0.25)", "refill",
     6, 2, ([BOS, A, B_, EOS], 0.66 * 0.48 * 0.95),
     {"greedy": [BOS, A, C, A, EOS], "no_refill": [BOS, EOS], "drop_finished": [BOS, A, C, A, PAD, PAD]}),
    ("no length penalty: <bos> <eos> (0.45) beats <bos> 3 4 5 <eos> (0.55 · 0.9 · 0.9 · 0.9)", "short wins",
     6, 2, ([BOS, EOS], 0.45), {"length_norm": [BOS, A, B_, C, EOS]}),
    ("a finished <bos> <eos> (0.3) stays finished while the beam goes on", "kept finished", 6, 2,
     ([BOS, EOS], 0.3), {"finished_compete": [BOS, A, A, C, EOS]}),
]
SHIFT = 2.0  # the logits at position j are the log-probabilities plus SHIFT * j: only log-softmax undoes it
BEAM_RULE = ("At each step extend every unfinished hypothesis by every token, keep the beam_size best "
             "extensions, and move those that end in eos_id to the finished set: the next step again keeps "
             "beam_size unfinished extensions.")
BEAM_MISTAKES = {  # the first whose ids match is named: the more specific ones first
    "finished_compete": ("finished hypotheses kept in the beam, taking slots from the unfinished ones",
                         BEAM_RULE),
    "length_norm": ("hypotheses ranked by their mean log-probability per token (a length penalty)",
                    "The contract ranks by the sum of the log-probabilities, with no length penalty."),
    "no_refill": ("a beam that shrinks by one for every finished hypothesis", BEAM_RULE),
    "drop_finished": ("finished hypotheses thrown away", "Keep every hypothesis that ends in eos_id in a "
                      "finished set, and return the best of the finished and the unfinished ones."),
    "greedy": ("beam_size ignored: the greedy choice at every step",
               "Keep the beam_size best extensions of all hypotheses, not one."),
}


class TableModel(nn.Module):
    """A scripted translator for one sentence with the notebook's interface (encode, decode,
    pad_id): the next-word probabilities after a prefix come from a table, shifted logits."""

    def __init__(self, table, vocab: int = 7):
        super().__init__()
        self.table, self.vocab, self.pad_id = table, vocab, PAD

    def encode(self, src, src_mask=None):
        return torch.zeros(*src.shape, 4)  # (B, n_src, 4): a memory it never reads

    def decode(self, tgt, memory, src_mask=None):
        logits = torch.full((*tgt.shape, self.vocab), -30.0)  # (k, n, vocab)
        for i, row in enumerate(tgt.tolist()):
            for j in range(len(row)):
                for word, p in self.table.get(tuple(row[1:j + 1]), {EOS: 1.0}).items():
                    logits[i, j, word] = math.log(p) + SHIFT * j
        return logits

    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src))


def _beam_result(beam_search, table, max_len, beam_size, case) -> tuple[list[int], float]:
    """The learner's (ids, score) as a list and a float, after the checks of their types, of
    bos_id first and of max_len."""
    src = torch.tensor([[7, 5, 6]])  # (1, n_src): a source the table model never reads
    result = run_learner("beam_search", case, beam_search, TableModel(TABLES[table]), src, BOS, EOS, max_len,
                         beam_size=beam_size)
    if not isinstance(result, tuple) or len(result) != 2:
        raise VisibleCheckFailure(f"beam_search should return a pair (ids, score), but returned "
                                  f"{type(result).__name__} in case '{case}'.")
    ids, score = result
    (row,) = check_token_ids(ids, "beam_search's ids", 1, BOS, max_len, case)
    try:
        return row, float(score)
    except (TypeError, ValueError, RuntimeError):
        raise VisibleCheckFailure(f"beam_search's score should be a number (a float), but is a "
                                  f"{type(score).__name__} in case '{case}'.") from None


@instant
def check_beam_search(beam_search) -> None:
    """On scripted tables whose best hypotheses are known: the ids and the score (a sum of
    log-probabilities), the finished set, the refill, no length penalty, max_len, beam_size=1."""
    for case, table, max_len, beam_size, (want, probability), known in BEAM_CASES:
        ids, score = _beam_result(beam_search, table, max_len, beam_size, case)
        if EOS in ids[1:-1]:
            raise VisibleCheckFailure(f"beam_search returned a hypothesis that goes on after eos_id={EOS} "
                                      f"in case '{case}': a hypothesis that ends in eos_id is finished; it "
                                      "is not extended.")
        if ids != want:
            named = next((name for name in BEAM_MISTAKES if known.get(name) == ids), None)
            raise VisibleCheckFailure(
                f"beam_search did not return the best hypothesis of the search in case '{case}'." + (
                    f"\nThis looks like {BEAM_MISTAKES[named][0]}. {BEAM_MISTAKES[named][1]}" if named else
                    f"\n{BEAM_RULE} Stop when the best finished score is at least the best unfinished one."))
        if not close_score(score, math.log(probability)):
            raise VisibleCheckFailure(
                f"beam_search found the right sentence but its score is {score:.4g} instead of "
                f"log({probability:.4g}) = {math.log(probability):.4g} in case '{case}': the score is the "
                "sum of the log-probabilities (log-softmax of the logits) of every token after bos_id."
                + _score_hint(score, probability, len(ids)))
    passed("beam_search finds what greedy misses, keeps finished sentences apart, scores log-probabilities.")


def _score_hint(score: float, probability: float, n: int) -> str:
    """What a wrong score of the right sentence probably is."""
    if math.isclose(score, probability, rel_tol=1e-4, abs_tol=1e-6):
        return " It looks like a probability: return the sum of the log-probabilities instead."
    if close_score(score, math.log(probability) + SHIFT * sum(range(n - 1))):
        return (" This looks like hypotheses scored with the raw logits. Logits are not log-probabilities: "
                "add torch.log_softmax(logits[:, -1], dim=-1) to each hypothesis' score.")
    return ""
