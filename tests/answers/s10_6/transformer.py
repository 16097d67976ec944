"""Transformer: right answers written differently, and planted bugs (built on the notebook's blocks,
positional encoding and masks)."""

import math

import torch
from torch import nn

from course.visible.s10_6.transformer import (
    BLOCK_ACTIVATION,
    BLOCK_NORM_FIRST,
    CREATION_ORDER,
    EMB_SCALE,
    FUTURE_MASK,
    NO_CAUSAL,
    NO_CROSS_PADDING,
    NO_ENCODER_NORM,
    NO_FINAL_NORM,
    NO_PADDING,
    NO_SRC_POSITIONS,
    NO_TGT_POSITIONS,
    PROBABILITIES,
)
from tests.answers import bug, right, with_pieces, with_torch_attention
from tests.answers.s10_6 import given
from tests.answers.s10_6.causal_mask import ignores_device

EXERCISE = "Transformer"
# The notebook's, set by answers().
TransformerBlock = DecoderBlock = PositionalEncoding = causal_mask = padding_mask = None


class TransformerBase(nn.Module):
    """A right answer written independently of the solution; bugs override one piece."""

    scale = 1.0

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                 norm_first=False, max_len=64, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        options = dict(dropout=dropout, activation=activation, norm_first=norm_first)
        self.encoder_layers = nn.ModuleList(
            [TransformerBlock(d_model, num_heads, d_ff, **options) for _ in range(num_encoder_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderBlock(d_model, num_heads, d_ff, **options) for _ in range(num_decoder_layers)])
        self.encoder_norm = self.final_norm(d_model, norm_first)
        self.decoder_norm = self.final_norm(d_model, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab_size)

    def final_norm(self, d_model, norm_first):
        return nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def embed(self, table, ids, positions=True):
        x = table(ids) * self.scale
        return self.pos_encoding(x) if positions else x

    def target_mask(self, tgt):
        return causal_mask(tgt.shape[1], device=tgt.device)

    def memory_mask(self, src_mask):
        return src_mask

    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt, memory, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=self.target_mask(tgt), memory_mask=self.memory_mask(src_mask))
        return self.out(self.decoder_norm(y))

    def forward(self, src, tgt):
        mask = padding_mask(src, self.pad_id)
        return self.decode(tgt, self.encode(src, mask), mask)


class TransformerTargetPadding(TransformerBase):
    """A right answer that also hides target padding in the decoder's self-attention."""

    def target_mask(self, tgt):
        return padding_mask(tgt, self.pad_id)[:, :, 0, None, :] & causal_mask(tgt.shape[1], tgt.device)


class TransformerNoCausal(TransformerBase):
    def target_mask(self, tgt):
        return None


class TransformerCausalInverted(TransformerBase):
    def target_mask(self, tgt):
        return ~causal_mask(tgt.shape[1], tgt.device) | torch.eye(tgt.shape[1], dtype=torch.bool)


class TransformerNoPadding(TransformerBase):
    def encode(self, src, src_mask):
        return super().encode(src, None)

    def memory_mask(self, src_mask):
        return None


class TransformerNoCrossPadding(TransformerBase):
    def memory_mask(self, src_mask):
        return None


class TransformerPadZero(TransformerBase):
    def forward(self, src, tgt):
        mask = padding_mask(src, 0)
        return self.decode(tgt, self.encode(src, mask), mask)


class TransformerForwardNoMask(TransformerBase):
    def forward(self, src, tgt):
        return self.decode(tgt, self.encode(src, None), None)


class TransformerNoFinalNorm(TransformerBase):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        return x

    def decode(self, tgt, memory, src_mask):
        y = self.embed(self.tgt_embed, tgt)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=self.target_mask(tgt), memory_mask=src_mask)
        return self.out(y)


class TransformerFinalNormAlways(TransformerBase):
    def final_norm(self, d_model, norm_first):
        return nn.LayerNorm(d_model)


class TransformerScaled(TransformerBase):
    scale = math.sqrt(12)  # sqrt(d_model) for the checks' d_model=12

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, *args, **kwargs):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, *args, **kwargs)
        self.scale = math.sqrt(d_model)


class TransformerNoTargetPositions(TransformerBase):
    def decode(self, tgt, memory, src_mask):
        y = self.embed(self.tgt_embed, tgt, positions=False)
        for layer in self.decoder_layers:
            y = layer(y, memory, tgt_mask=self.target_mask(tgt), memory_mask=src_mask)
        return self.out(self.decoder_norm(y))


class TransformerSharedEmbedding(TransformerBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tgt_embed = self.src_embed


class NoSourcePositions(TransformerBase):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src, positions=False)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        return self.encoder_norm(x)


class IgnoresMaxLen(TransformerBase):
    def __init__(self, *args, max_len=64, **kwargs):
        super().__init__(*args, **kwargs)
        self.pos_encoding = PositionalEncoding(self.out.in_features)


class DecoderCountFromEncoder(TransformerBase):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, **kwargs):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                         num_encoder_layers, **kwargs)


class RepeatedBlock(TransformerBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.encoder_layers = nn.ModuleList([self.encoder_layers[0]] * len(self.encoder_layers))


class BlocksAlwaysPostNorm(TransformerBase):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                 norm_first=False, max_len=64, pad_id=0):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                         num_decoder_layers, dropout, activation, norm_first, max_len, pad_id)
        options = dict(dropout=dropout, activation=activation)  # norm_first forgotten
        self.encoder_layers = nn.ModuleList(
            [TransformerBlock(d_model, num_heads, d_ff, **options) for _ in range(num_encoder_layers)])
        self.decoder_layers = nn.ModuleList(
            [DecoderBlock(d_model, num_heads, d_ff, **options) for _ in range(num_decoder_layers)])


class BlocksAlwaysRelu(TransformerBase):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                 norm_first=False, max_len=64, pad_id=0):
        super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                         num_decoder_layers, dropout, "relu", norm_first, max_len, pad_id)


class NoEncoderNorm(TransformerBase):
    def encode(self, src, src_mask):
        x = self.embed(self.src_embed, src)
        for layer in self.encoder_layers:
            x = layer(x, mask=src_mask)
        return x


class SoftmaxOutput(TransformerBase):
    def decode(self, tgt, memory, src_mask):
        return torch.softmax(super().decode(tgt, memory, src_mask), dim=-1)


class CausalOnCPU(TransformerBase):
    def target_mask(self, tgt):
        return causal_mask(tgt.shape[1])  # on the CPU whatever tgt's device


class OutputLayerFirst(TransformerBase):
    """out created right after the embeddings, before the blocks: every block starts from other numbers."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                 norm_first=False, max_len=64, pad_id=0):
        nn.Module.__init__(self)
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.out = nn.Linear(d_model, tgt_vocab_size)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        block = (d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.encoder_layers = nn.ModuleList(TransformerBlock(*block) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderBlock(*block) for _ in range(num_decoder_layers))
        self.encoder_norm = self.final_norm(d_model, norm_first)
        self.decoder_norm = self.final_norm(d_model, norm_first)


class DecoderBeforeEncoder(TransformerBase):
    """The decoder's blocks created before the encoder's."""

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                 num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                 norm_first=False, max_len=64, pad_id=0):
        nn.Module.__init__(self)
        self.pad_id = pad_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len, dropout)
        block = (d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.decoder_layers = nn.ModuleList(DecoderBlock(*block) for _ in range(num_decoder_layers))
        self.encoder_layers = nn.ModuleList(TransformerBlock(*block) for _ in range(num_encoder_layers))
        self.encoder_norm = self.final_norm(d_model, norm_first)
        self.decoder_norm = self.final_norm(d_model, norm_first)
        self.out = nn.Linear(d_model, tgt_vocab_size)


def answers(solution):
    given(globals(), solution)
    return [
        right("solution", solution["Transformer"]),
        right("the solution, the notebook's causal_mask ignoring device (the Annotated Transformer's): "
              "causal_mask's mistake", with_pieces(solution["Transformer"], causal_mask=ignores_device)),
        right("TransformerBase", TransformerBase),
        right("TransformerTargetPadding", TransformerTargetPadding),
        bug("no causal mask", TransformerNoCausal,
            hidden=r"decoder without the causal mask", mistake=NO_CAUSAL),
        bug("causal mask inverted", TransformerCausalInverted, hidden=r"shows each position the future",
            mistake=FUTURE_MASK),
        bug("no padding", TransformerNoPadding, hidden=r"ignores the source padding", mistake=NO_PADDING),
        bug("no memory mask", TransformerNoCrossPadding,
            hidden=r"without the source padding mask \(memory_mask\)",
            mistake=NO_CROSS_PADDING),
        bug("pad 0 in forward", TransformerPadZero,
            hidden=r"forward builds the source padding mask with the model.s own pad_id"),
        bug("forward without mask", TransformerForwardNoMask, hidden=r"model\(src, tgt\) differs"),
        bug("no final norm (pre-norm)", TransformerNoFinalNorm, hidden=r"without their final LayerNorms",
            mistake=NO_FINAL_NORM),
        bug("final norm in post-norm", TransformerFinalNormAlways,
            hidden=r"needs self\.encoder_norm = Identity"),
        bug("scaled embeddings", TransformerScaled, hidden=r"sqrt\(d_model\)", mistake=EMB_SCALE),
        bug("no target positions", TransformerNoTargetPositions,
            hidden=r"target embeddings without the positional",
            mistake=NO_TGT_POSITIONS),
        bug("shared embedding", TransformerSharedEmbedding,
            hidden=r"tgt_embed is the same module as Transformer\.src_embed"),
        bug("no source positions", NoSourcePositions, mistake=NO_SRC_POSITIONS),
        bug("max_len ignored", IgnoresMaxLen),
        bug("decoder blocks counted with num_encoder_layers", DecoderCountFromEncoder),
        bug("one encoder block repeated (aliased)", RepeatedBlock),
        bug("norm_first not passed to the blocks", BlocksAlwaysPostNorm, mistake=BLOCK_NORM_FIRST),
        bug("activation not passed to the blocks", BlocksAlwaysRelu, mistake=BLOCK_ACTIVATION),
        bug("pre-norm: encoder_norm not applied", NoEncoderNorm, mistake=NO_ENCODER_NORM),
        bug("probabilities returned instead of logits", SoftmaxOutput, mistake=PROBABILITIES),
        bug("out created before the blocks", OutputLayerFirst, hidden=r"order src_embed, tgt_embed, out",
            mistake=CREATION_ORDER),
        bug("decoder blocks created before the encoder's", DecoderBeforeEncoder,
            hidden=r"order src_embed, tgt_embed, decoder_layers, encoder_layers", mistake=CREATION_ORDER),
        bug("nn.MultiheadAttention core in every block", with_torch_attention(TransformerBase),
            hidden=r"No credit.*multi_head_attention_forward"),
        bug("causal mask on the CPU", CausalOnCPU, hidden=r"fixed device|without a device"),
    ]
