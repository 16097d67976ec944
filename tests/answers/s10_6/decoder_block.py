"""DecoderBlock: right answers written differently, and planted bugs (built on the notebook's
MultiHeadAttention and FeedForward)."""

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_6.decoder_block import (
    ALWAYS_POST,
    ALWAYS_PRE,
    CREATION_ORDER,
    CROSS_FROM_X,
    DROPOUT_AFTER_RESIDUAL,
    DROPOUT_ON_INPUT,
    FFN_NO_DROPOUT,
    NO_CROSS_RESIDUAL,
    NO_DROPOUT,
    NO_MEMORY_MASK,
    NO_NORM3,
    NO_TGT_MASK,
    NORM2_TWICE,
    NORM_MEMORY,
    RELU,
    UNSCALED_DROPOUT,
)
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right, unscaled_dropout
from tests.answers.s10_6 import given

EXERCISE = "DecoderBlock"
MultiHeadAttention = FeedForward = None  # the notebook's, set by answers()


class DecoderBase(nn.Module):
    """A right answer written as a loop over (sublayer, norm) pairs; bugs override one piece."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def attend_self(self, x, memory, tgt_mask, memory_mask):
        return self.self_attn(x, x, x, mask=tgt_mask)[0]

    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        return self.cross_attn(x, memory, memory, mask=memory_mask)[0]

    def feed_forward(self, x, memory, tgt_mask, memory_mask):
        return self.ffn(x)

    def steps(self):
        return [(self.attend_self, self.norm1), (self.attend_cross, self.norm2),
                (self.feed_forward, self.norm3)]

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for sublayer, norm in self.steps():
            if self.norm_first:
                x = x + self.drop(sublayer(norm(x), memory, tgt_mask, memory_mask))
            else:
                x = norm(x + self.drop(sublayer(x, memory, tgt_mask, memory_mask)))
        return x


class DecoderFunctionalDropout(nn.Module):
    """A right answer with F.dropout (training flag respected) and the three sublayers spelled out."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.p, self.pre = dropout, norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        def drop(t):
            return F.dropout(t, self.p, self.training)

        if self.pre:
            h = self.norm1(x)
            x = x + drop(self.self_attn(h, h, h, tgt_mask)[0])
            x = x + drop(self.cross_attn(self.norm2(x), memory, memory, memory_mask)[0])
            return x + drop(self.ffn(self.norm3(x)))
        x = self.norm1(x + drop(self.self_attn(x, x, x, tgt_mask)[0]))
        x = self.norm2(x + drop(self.cross_attn(x, memory, memory, memory_mask)[0]))
        return self.norm3(x + drop(self.ffn(x)))




class DecoderCrossFromX(DecoderBase):
    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        return self.cross_attn(x, x, x)[0]


class DecoderQueriesFromMemory(DecoderBase):
    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        return self.cross_attn(memory, x, x)[0]


class DecoderNoNorm3(DecoderBase):
    """norm3 created but the feed-forward sublayer has no norm."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for sublayer, norm in self.steps()[:2]:
            x = x + sublayer(norm(x), memory, tgt_mask, memory_mask) if self.norm_first \
                else norm(x + sublayer(x, memory, tgt_mask, memory_mask))
        return x + self.ffn(x)


class DecoderWithoutNorm3(DecoderNoNorm3):
    """norm3 never created."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        del self.norm3

    def steps(self):
        return [(self.attend_self, self.norm1), (self.attend_cross, self.norm2)]


class DecoderNorm2Twice(DecoderBase):
    def steps(self):
        return [(self.attend_self, self.norm1), (self.attend_cross, self.norm2),
                (self.feed_forward, self.norm2)]


class DecoderNoTgtMask(DecoderBase):
    def attend_self(self, x, memory, tgt_mask, memory_mask):
        return self.self_attn(x, x, x)[0]


class DecoderNoMemoryMask(DecoderBase):
    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        return self.cross_attn(x, memory, memory)[0]


class DecoderNormsMemory(DecoderBase):
    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        m = self.norm2(memory) if self.norm_first else memory
        return self.cross_attn(x, m, m, memory_mask)[0]


class DecoderNoCrossResidual(DecoderBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            x = x + self.attend_self(self.norm1(x), memory, tgt_mask, memory_mask)
            x = self.attend_cross(self.norm2(x), memory, tgt_mask, memory_mask)
            return x + self.ffn(self.norm3(x))
        x = self.norm1(x + self.attend_self(x, memory, tgt_mask, memory_mask))
        x = self.norm2(self.attend_cross(x, memory, tgt_mask, memory_mask))
        return self.norm3(x + self.ffn(x))


class DecoderAlwaysPost(DecoderBase):
    def __init__(self, *args, norm_first=False, **kwargs):
        super().__init__(*args, **kwargs)


class DecoderAlwaysPre(DecoderBase):
    def __init__(self, *args, norm_first=False, **kwargs):
        super().__init__(*args, norm_first=True, **kwargs)


class DecoderMasksSwapped(DecoderBase):
    def attend_self(self, x, memory, tgt_mask, memory_mask):
        return self.self_attn(x, x, x, mask=memory_mask)[0]

    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        return self.cross_attn(x, memory, memory, mask=tgt_mask)[0]


class DecoderTorchAttention(DecoderBase):
    """Cross-attention through nn.MultiheadAttention's functional core: forbidden."""

    def attend_cross(self, x, memory, tgt_mask, memory_mask):
        a = self.cross_attn
        h = a.num_heads
        blocked = None if memory_mask is None else ~memory_mask.expand(
            x.shape[0], h, x.shape[1], memory.shape[1]).reshape(-1, x.shape[1], memory.shape[1])
        out, _ = F.multi_head_attention_forward(
            x.transpose(0, 1), memory.transpose(0, 1), memory.transpose(0, 1), x.shape[-1], h,
            None, torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]), None, None, False, 0.0,
            a.w_o.weight, a.w_o.bias, training=False, attn_mask=blocked,
            use_separate_proj_weight=True, q_proj_weight=a.w_q.weight,
            k_proj_weight=a.w_k.weight, v_proj_weight=a.w_v.weight)
        return out.transpose(0, 1)


class DecoderAlwaysDropout(DecoderBase):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        self.drop.train()  # dropout even in eval()
        return super().forward(x, memory, tgt_mask, memory_mask)


class SharedAttention(DecoderBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cross_attn = self.self_attn


class ActivationIgnored(DecoderBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, "relu", norm_first)


class SharedNorm(DecoderBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm3 = self.norm2


class DecoderNoDropout(DecoderBase):
    """The sublayers' outputs never dropped (FeedForward still drops inside)."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for sublayer, norm in self.steps():
            x = x + sublayer(norm(x), memory, tgt_mask, memory_mask) if self.norm_first \
                else norm(x + sublayer(x, memory, tgt_mask, memory_mask))
        return x


class DecoderDropoutAfterResidual(DecoderBase):
    """Dropout on the residual sum instead of on the sublayer's output."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for sublayer, norm in self.steps():
            x = self.drop(x + sublayer(norm(x), memory, tgt_mask, memory_mask)) if self.norm_first \
                else norm(self.drop(x + sublayer(x, memory, tgt_mask, memory_mask)))
        return x


class DecoderDropoutOnInput(DecoderBase):
    """Dropout on what each sublayer reads (the queries' stream), not on what it returns."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        for sublayer, norm in self.steps():
            x = x + sublayer(self.drop(norm(x)), memory, tgt_mask, memory_mask) if self.norm_first \
                else norm(x + sublayer(self.drop(x), memory, tgt_mask, memory_mask))
        return x


class DecoderFFNWithoutDropout(DecoderBase):
    """FeedForward built without the block's dropout (the sublayer dropouts are right)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.ffn = FeedForward(d_model, d_ff, activation)


class DecoderNormsFirst(DecoderBase):
    """The LayerNorms created before the attentions and the feed-forward network."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        nn.Module.__init__(self)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first


class DecoderCrossFirst(DecoderBase):
    """cross_attn created before self_attn: each starts with the other's random weights."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        nn.Module.__init__(self)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first


class DecoderUnscaledDropout(DecoderBase):
    """Dropout written by hand: entries zeroed with probability p, the kept ones not divided by 1 - p."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first)
        del self.drop
        self.drop = unscaled_dropout(self, dropout)


def answers(solution):
    given(globals(), solution)
    return [
        right("solution", solution["DecoderBlock"]),
        right("DecoderBase", DecoderBase),
        right("DecoderFunctionalDropout", DecoderFunctionalDropout),
        bug("cross from x", DecoderCrossFromX, hidden=r"keys and values come from x", mistake=CROSS_FROM_X),
        bug("queries from memory", DecoderQueriesFromMemory,
            hidden=r"must match the size.*queries of both attentions come from x"),
        bug("norm3 unused", DecoderNoNorm3, hidden=r"missing third LayerNorm", mistake=NO_NORM3),
        bug("no norm3", DecoderWithoutNorm3, hidden=r"needs a submodule self\.norm3"),
        bug("norm2 twice", DecoderNorm2Twice, hidden=r"norm2 used for the feed-forward", mistake=NORM2_TWICE),
        bug("no tgt_mask", DecoderNoTgtMask, hidden=r"self-attention without tgt_mask", mistake=NO_TGT_MASK),
        bug("no memory_mask", DecoderNoMemoryMask, hidden=r"cross-attention without memory_mask",
            mistake=NO_MEMORY_MASK),
        bug("memory normed", DecoderNormsMemory, hidden=r"normalises memory", mistake=NORM_MEMORY),
        bug("no cross residual", DecoderNoCrossResidual, hidden=r"without its residual",
            mistake=NO_CROSS_RESIDUAL),
        bug("always post-norm", DecoderAlwaysPost, hidden=r"post-norm although norm_first=True",
            mistake=ALWAYS_POST),
        bug("always pre-norm", DecoderAlwaysPre, hidden=r"pre-norm although norm_first=False",
            mistake=ALWAYS_PRE),
        bug("masks swapped", DecoderMasksSwapped, hidden=r"raised RuntimeError|differs"),
        bug("nn.MultiheadAttention core", DecoderTorchAttention,
            hidden=r"No credit.*multi_head_attention_forward"),
        bug("dropout in eval", DecoderAlwaysDropout, hidden=r"dropout=0\.1 in eval"),
        bug("cross_attn is self_attn (aliased)", SharedAttention),
        bug("activation ignored", ActivationIgnored, mistake=RELU),
        bug("norm3 is norm2 (aliased)", SharedNorm),
        bug("no sublayer dropout", DecoderNoDropout, hidden=r"dropout=1\.0 in train", mistake=NO_DROPOUT),
        bug("dropout after the residual sum", DecoderDropoutAfterResidual, hidden=r"dropout=1\.0 in train",
            mistake=DROPOUT_AFTER_RESIDUAL),
        bug("dropout on the sublayer's input", DecoderDropoutOnInput, hidden=r"dropout=1\.0 in train",
            mistake=DROPOUT_ON_INPUT),
        bug("FeedForward without dropout", DecoderFFNWithoutDropout, hidden=r"self\.ffn's output in train",
            mistake=FFN_NO_DROPOUT),
        bug("dropout written by hand, unscaled", DecoderUnscaledDropout, hidden=r"dropout=0\.\d+ in train",
            mistake=UNSCALED_DROPOUT),
        bug("norms created first", DecoderNormsFirst, hidden=r"order norm1, norm2, norm3, self_attn",
            mistake=CREATION_ORDER),
        bug("cross_attn created before self_attn", DecoderCrossFirst, hidden=r"order cross_attn, self_attn",
            mistake=CREATION_ORDER),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["DecoderBlock"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
