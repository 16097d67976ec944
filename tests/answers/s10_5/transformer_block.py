"""TransformerBlock: right answers written differently, and planted bugs (built on the notebook's
MultiHeadAttention and FeedForward)."""

import torch
import torch.nn.functional as F
from torch import nn

from course.checking.blocks import UNSCALED_DROPOUT
from course.visible.s10_5.feed_forward import NO_ACTIVATION
from course.visible.s10_5.transformer_block import (
    MASK_IGNORED,
    MASK_INVERTED,
    NO_RESIDUAL,
    NORM1_TWICE,
    NORM_FIRST_IGNORED,
    NORMS_SWAPPED,
    POST_NORM_INPUT,
    POST_NORM_SUBLAYER,
    PRE_FOR_POST,
    PRE_NORMED_RESIDUAL,
    RELU,
)
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right, unscaled_dropout
from tests.answers.s10_5 import given
from tests.answers.s10_5.feed_forward import FFNBase, FFNNoActivation

EXERCISE = "TransformerBlock"
#: Signature operators a right answer may run although none declared does, each with why
#: (tests/test_operator_walk.py).
ALLOWED_OPERATORS = dict.fromkeys(
    ("aten._scaled_dot_product_flash_attention_for_cpu",
     "aten._scaled_dot_product_flash_attention_for_cpu_backward"),
    "the attention inside a block is the learner's own choice (the block is the exercise)")
MultiHeadAttention = FeedForwardSolution = None  # the notebook's, set by answers()


class BlockBase(nn.Module):
    """A right answer with the two arrangements spelled out; planted bugs override a step."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForwardSolution(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def sa(self, x, mask):
        return self.drop(self.self_attn(x, x, x, mask)[0])

    def ff(self, x):
        return self.drop(self.ffn(x))

    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x), mask)
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.sa(x, mask))
        return self.norm2(x + self.ff(x))


class BlockFunctional(nn.Module):
    """A right answer: functional layer norms from the modules' parameters, keyword mask."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FFNBase(d_model, d_ff, activation=activation, dropout=dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.p, self.pre = dropout, norm_first

    def ln(self, norm, x):
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)

    def forward(self, x, mask=None):
        steps = ((lambda t: self.self_attn(t, t, t, mask=mask)[0], self.norm1), (self.ffn, self.norm2))
        for sublayer, norm in steps:
            if self.pre:
                x = x + F.dropout(sublayer(self.ln(norm, x)), self.p, self.training)
            else:
                x = self.ln(norm, x + F.dropout(sublayer(x), self.p, self.training))
        return x



class BlockNormSublayer(BlockBase):  # post-norm: x + LN(Sublayer(x))
    def forward(self, x, mask=None):
        if self.norm_first:
            return super().forward(x, mask)
        x = x + self.norm1(self.sa(x, mask))
        return x + self.norm2(self.ff(x))


class BlockNormInput(BlockBase):  # post-norm: LN(x) + Sublayer(x)
    def forward(self, x, mask=None):
        if self.norm_first:
            return super().forward(x, mask)
        x = self.norm1(x) + self.sa(x, mask)
        return self.norm2(x) + self.ff(x)


class BlockNormedResidual(BlockBase):  # pre-norm: h = LN(x); h + Sublayer(h)
    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = self.norm1(x)
        x = x + self.sa(x, mask)
        x = self.norm2(x)
        return x + self.ff(x)


class BlockNormFirstIgnored(BlockBase):
    def forward(self, x, mask=None):
        x = self.norm1(x + self.sa(x, mask))
        return self.norm2(x + self.ff(x))


class BlockAlwaysPre(BlockBase):
    def forward(self, x, mask=None):
        x = x + self.sa(self.norm1(x), mask)
        return x + self.ff(self.norm2(x))


class BlockNoActivation(BlockBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.ffn = FFNNoActivation(d_model, d_ff, activation, dropout)


class BlockNormsSwapped(BlockBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm2(x), mask)
            return x + self.ff(self.norm1(x))
        x = self.norm2(x + self.sa(x, mask))
        return self.norm1(x + self.ff(x))


class BlockSharedNorm(BlockBase):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norm2 = self.norm1


class BlockNorm1Twice(BlockBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x), mask)
            return x + self.ff(self.norm1(x))
        x = self.norm1(x + self.sa(x, mask))
        return self.norm1(x + self.ff(x))


class BlockMaskInverted(BlockBase):
    def sa(self, x, mask):
        return super().sa(x, None if mask is None else ~mask)


class BlockMaskIgnored(BlockBase):
    def sa(self, x, mask):
        return super().sa(x, None)


class BlockNoResidual(BlockBase):
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.sa(self.norm1(x), mask)
            return self.ff(self.norm2(x))
        x = self.norm1(self.sa(x, mask))
        return self.norm2(self.ff(x))


class BlockTorchInside(BlockBase):
    """Hands the work to nn.TransformerEncoderLayer, with this block's weights copied in."""

    def forward(self, x, mask=None):
        d, h = x.shape[-1], self.self_attn.num_heads
        layer = nn.TransformerEncoderLayer(d, h, self.ffn.linear1.out_features, dropout=0.0,
                                           batch_first=True, norm_first=self.norm_first).to(x)
        with torch.no_grad():
            a = self.self_attn
            layer.self_attn.in_proj_weight.copy_(torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]))
            layer.self_attn.in_proj_bias.copy_(torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]))
            layer.self_attn.out_proj.load_state_dict(a.w_o.state_dict())
        return layer(x)


class BlockEps(BlockBase):
    def __init__(self, d_model, *args, **kwargs):
        super().__init__(d_model, *args, **kwargs)
        self.norm1, self.norm2 = nn.LayerNorm(d_model, eps=1e-6), nn.LayerNorm(d_model, eps=1e-6)


class BlockNoValueError(BlockBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout,
                         "gelu" if activation == "gelu" else "relu", norm_first)


class BlockDropoutAlwaysOn(BlockBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.p = dropout

    def sa(self, x, mask):
        return F.dropout(self.self_attn(x, x, x, mask)[0], self.p, training=True)



class BlockActivationIgnored(BlockBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, "relu", norm_first)
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)


class BlockDropoutIgnored(BlockBase):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, 0.0, activation, norm_first)


class BlockUnscaledDropout(BlockBase):
    """Dropout written by hand: entries zeroed with probability p, the kept ones not divided by 1 - p."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first)
        del self.drop
        self.drop = unscaled_dropout(self, dropout)


class BlockFFNSharedAttention(BlockBase):
    """The pre-norm input normalised with norm1 for both sublayers, norm2 never used."""

    def forward(self, x, mask=None):
        if not self.norm_first:
            return super().forward(x, mask)
        x = x + self.sa(self.norm1(x), mask)
        return x + self.ff(self.norm1(x))


def answers(solution):
    given(globals(), solution)
    return [
        right("solution", solution["TransformerBlock"]),
        right("BlockBase", BlockBase),
        right("BlockFunctional", BlockFunctional),
        bug("BlockNormSublayer", BlockNormSublayer,
            hidden=r"norm before the residual add.*x \+ LN\(Sublayer\(x\)\)",
            mistake=POST_NORM_SUBLAYER),
        bug("BlockNormInput", BlockNormInput,
            hidden=r"norm before the residual add: LN\(x\) \+ Sublayer\(x\)",
            mistake=POST_NORM_INPUT),
        bug("BlockNormedResidual", BlockNormedResidual, hidden="residual taken from the normalised input",
            mistake=PRE_NORMED_RESIDUAL),
        bug("BlockNormFirstIgnored", BlockNormFirstIgnored, hidden="norm_first ignored",
            mistake=NORM_FIRST_IGNORED),
        bug("BlockAlwaysPre", BlockAlwaysPre, hidden="pre-norm computed although norm_first=False",
            mistake=PRE_FOR_POST),
        bug("BlockNoActivation", BlockNoActivation, hidden="without its activation", mistake=NO_ACTIVATION),
        bug("BlockNormsSwapped", BlockNormsSwapped, hidden="norm1 and norm2 swapped", mistake=NORMS_SWAPPED),
        bug("BlockSharedNorm", BlockSharedNorm, hidden="norm2 is the same module as TransformerBlock.norm1"),
        bug("BlockNorm1Twice", BlockNorm1Twice, hidden=r"one LayerNorm \(norm1\) used for both",
            mistake=NORM1_TWICE),
        bug("BlockMaskInverted", BlockMaskInverted, hidden="mask inverted", mistake=MASK_INVERTED),
        bug("BlockMaskIgnored", BlockMaskIgnored, hidden="mask not passed", mistake=MASK_IGNORED),
        bug("BlockNoResidual", BlockNoResidual, hidden="missing residual", mistake=NO_RESIDUAL),
        bug("BlockTorchInside", BlockTorchInside, hidden="No credit.*multi_head_attention_forward"),
        bug("BlockEps", BlockEps, hidden="eps=1e-06.*default eps=1e-5"),
        bug("BlockNoValueError", BlockNoValueError, hidden="should raise ValueError for activation='tanh'"),
        bug("BlockDropoutAlwaysOn", BlockDropoutAlwaysOn, hidden=r"eval\(\) mode"),
        bug("activation not passed to FeedForward", BlockActivationIgnored, mistake=RELU),
        bug("dropout not passed on", BlockDropoutIgnored),
        bug("pre-norm: norm1 for both", BlockFFNSharedAttention),
        bug("dropout written by hand, unscaled", BlockUnscaledDropout, hidden=r"dropout=0\.\d+ in train",
            mistake=UNSCALED_DROPOUT),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["TransformerBlock"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
