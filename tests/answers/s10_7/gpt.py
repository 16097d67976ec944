"""GPT: right answers written differently, and planted bugs (built on the notebook's given blocks)."""

import math

import torch
from torch import nn

from course.checking.blocks import UNSCALED_DROPOUT
from course.visible.s10_7.gpt import (
    BLOCKS_WITHOUT_DROPOUT,
    DROPOUT_BEFORE_POSITIONS,
    NO_EMBEDDING_DROPOUT,
    NO_FINAL_NORM,
    NO_MASK,
    NO_POSITIONS,
    NOT_CAUSAL,
    NOT_TIED,
    PAD_ID_ZERO,
    POST_NORM,
    RELU,
    SCALED,
    SINUSOIDAL,
)
from tests.answers import bug, right, with_torch_attention

EXERCISE = "GPT"


def family(TransformerBlock):
    """GPT classes on the given TransformerBlock; options switch on planted bugs."""

    class Written(nn.Module):
        """A right answer: its own masks (True = may attend), positions from a buffer-free arange."""

        norm_first = True
        activation = "gelu"
        block_dropout = 1
        tie = "same"

        def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers, max_len, pad_id=0, dropout=0.0):
            super().__init__()
            self.pad_id = pad_id
            self.tok_embed = nn.Embedding(vocab_size, d_model)
            self.pos_embed = nn.Embedding(max_len, d_model)
            block = (d_model, num_heads, d_ff, dropout * self.block_dropout)
            self.blocks = nn.ModuleList([TransformerBlock(*block, self.activation, norm_first=self.norm_first)
                                         for _ in range(num_layers)])
            self.norm = nn.LayerNorm(d_model)
            self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
            self.drop = nn.Dropout(dropout)
            if self.tie == "same":
                self.lm_head.weight = self.tok_embed.weight
            elif self.tie == "copy":
                self.lm_head.weight = nn.Parameter(self.tok_embed.weight.detach().clone())
            elif self.tie == "data":
                self.lm_head.weight.data = self.tok_embed.weight.data

        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.drop(self.tok_embed(ids) + self.pos_embed(positions))  # (B, n, d)

        def mask(self, ids):
            n = ids.shape[1]
            causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
            return causal & (ids != self.pad_id)[:, None, None, :]  # (B, 1, n, n)

        def finish(self, x):
            return self.lm_head(self.norm(x))

        def forward(self, ids):
            x, mask = self.embed(ids), self.mask(ids)
            for block in self.blocks:
                x = block(x, mask)
            return self.finish(x)

    class Einsum(Written):
        """A right answer: the tied output layer as an einsum with the embedding table."""

        def finish(self, x):
            return torch.einsum("bnd,vd->bnv", self.norm(x), self.tok_embed.weight)

    class Copy(Written):
        tie = "copy"

    class SharedData(Written):
        tie = "data"

    class PostNorm(Written):
        norm_first = False

    class ReLUBlocks(Written):
        activation = "relu"

    class NoPositions(Written):
        def embed(self, ids):
            return self.tok_embed(ids)

    class Sinusoidal(Written):
        def embed(self, ids):
            n, d = ids.shape[1], self.tok_embed.embedding_dim
            position = torch.arange(n, device=ids.device, dtype=torch.float64)[:, None]
            omega = 10000.0 ** (-torch.arange(0, d, 2, device=ids.device, dtype=torch.float64) / d)
            table = torch.zeros(n, d, device=ids.device, dtype=torch.float64)
            table[:, 0::2], table[:, 1::2] = (position * omega).sin(), (position * omega).cos()
            return self.tok_embed(ids) + table.to(self.tok_embed.weight.dtype)

    class NoEmbeddingDropout(Written):
        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.tok_embed(ids) + self.pos_embed(positions)

    class UnscaledEmbeddingDropout(Written):
        """The embeddings' dropout written by hand: entries zeroed, the kept ones not divided by 1 - p."""

        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            x = self.tok_embed(ids) + self.pos_embed(positions)  # (B, n, d)
            return x * (torch.rand_like(x) >= self.drop.p) if self.training else x

    class BlocksWithoutDropout(Written):
        block_dropout = 0

    class DropoutOnTokensOnly(Written):
        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.drop(self.tok_embed(ids)) + self.pos_embed(positions)

    class DropoutOnPositionsOnly(Written):
        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.tok_embed(ids) + self.drop(self.pos_embed(positions))

    class Scaled(Written):
        def embed(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            return self.tok_embed(ids) * math.sqrt(self.tok_embed.embedding_dim) + self.pos_embed(positions)

    class NoFinalNorm(Written):
        def finish(self, x):
            return self.lm_head(x)

    class CausalOnly(Written):
        """A right answer: padding comes last, so the causal mask alone hides it from every real token."""

        def mask(self, ids):
            n = ids.shape[1]
            return torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()

    class PaddingOnly(Written):
        def mask(self, ids):
            return (ids != self.pad_id)[:, None, None, :]

    class NoMask(Written):
        def mask(self, ids):
            return None

    class PadZero(Written):
        def mask(self, ids):
            n = ids.shape[1]
            return torch.ones(n, n, dtype=torch.bool, device=ids.device).tril() & (ids != 0)[:, None, None, :]

    class NormMissing(Written):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            del self.norm

        def finish(self, x):
            return self.lm_head(x)

    class HeadBias(Written):
        def __init__(self, vocab_size, d_model, *args, **kwargs):
            super().__init__(vocab_size, d_model, *args, **kwargs)
            self.lm_head.bias = nn.Parameter(torch.zeros(vocab_size))

    class NormFirstCreated(Written):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            norm = self._modules.pop("norm")
            self._modules = {"norm": norm, **self._modules}

    class FixedDevice(Written):
        def mask(self, ids):
            n = ids.shape[1]
            return torch.ones(n, n, dtype=torch.bool).tril() & (ids != self.pad_id)[:, None, None, :]

    return locals()


def answers(solution):
    c = family(solution["TransformerBlock"])
    return [
        right("solution", solution["GPT"]),
        right("GPTWritten", c["Written"]),
        right("GPTEinsum", c["Einsum"]),
        right("GPT with the causal mask alone", c["CausalOnly"]),
        bug("lm_head a copy", c["Copy"], hidden="not tok_embed.weight", mistake=NOT_TIED),
        bug("lm_head shares .data only", c["SharedData"], mistake=NOT_TIED),
        bug("post-norm blocks", c["PostNorm"], hidden="differs", mistake=POST_NORM),
        bug("ReLU blocks", c["ReLUBlocks"], hidden="differs", mistake=RELU),
        bug("no positions", c["NoPositions"], mistake=NO_POSITIONS),
        bug("sinusoidal positions", c["Sinusoidal"], mistake=SINUSOIDAL),
        bug("embeddings scaled by sqrt(d)", c["Scaled"], mistake=SCALED),
        bug("final norm unused", c["NoFinalNorm"], mistake=NO_FINAL_NORM),
        bug("no dropout on the embeddings", c["NoEmbeddingDropout"], hidden="dropout=1.0",
            mistake=NO_EMBEDDING_DROPOUT),
        bug("blocks without dropout", c["BlocksWithoutDropout"], hidden="blocks still add",
            mistake=BLOCKS_WITHOUT_DROPOUT),
        bug("dropout on the token embedding only", c["DropoutOnTokensOnly"], hidden="position to position",
            mistake=DROPOUT_BEFORE_POSITIONS),
        bug("dropout on the position embedding only", c["DropoutOnPositionsOnly"], hidden="depend on the ids",
            mistake=NO_EMBEDDING_DROPOUT),
        bug("embedding dropout written by hand, unscaled", c["UnscaledEmbeddingDropout"],
            hidden=r"dropout=0\.\d+ in train", mistake=UNSCALED_DROPOUT),
        bug("no causal mask", c["PaddingOnly"], mistake=NOT_CAUSAL),
        bug("no mask at all", c["NoMask"], mistake=NO_MASK),
        bug("pad_id 0 hard-coded", c["PadZero"], hidden="differs", mistake=PAD_ID_ZERO),
        bug("no final norm", c["NormMissing"], hidden="needs self.norm"),
        bug("nn.MultiheadAttention core in every block", with_torch_attention(c["Written"]),
            hidden=r"No credit.*multi_head_attention_forward"),
        bug("lm_head with a bias", c["HeadBias"], hidden="no bias"),
        bug("submodules out of order", c["NormFirstCreated"], hidden="order"),
        bug("causal mask on a fixed device", c["FixedDevice"], hidden="without a device"),
    ]
