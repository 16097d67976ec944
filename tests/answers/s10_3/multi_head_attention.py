"""MultiHeadAttention: right answers written differently, and planted bugs."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_3.multi_head_attention import D_MODEL, INVERTED, MERGE, NO_MASK, NO_W_O, SPLIT, VALUES
from tests.answers import ON_A_FIXED_DEVICE, bug, on_a_fixed_device, right

EXERCISE = "MultiHeadAttention"
#: Signature operators a right answer may run although none declared does, each with why
#: (tests/test_operator_walk.py).
ALLOWED_OPERATORS = {
    "aten.baddbmm": ("the scores plus the mask in one batched product: a primitive of right answers "
                     "(test_tripwire's attention_baddbmm)"),
}


class LearnerMHA(nn.Module):
    """A learner-like module; the class attributes switch one mistake on."""

    split_transpose = merge_transpose = use_w_o = True
    scale_by_d_model = invert_mask = average_heads = check_divisible = False
    force_bias = None

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if self.check_divisible and d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        bias = bias if self.force_bias is None else self.force_bias
        self.h, self.d_model = num_heads, d_model
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def split(self, x):
        B, n, _ = x.shape
        if self.split_transpose:
            return x.view(B, n, self.h, -1).transpose(1, 2)
        return x.reshape(B, self.h, n, -1)

    def attend(self, q, k, v, mask):
        d = self.d_model if self.scale_by_d_model else q.shape[-1]
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        if mask is not None:
            scores = scores.masked_fill(mask if self.invert_mask else ~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights

    def forward(self, query, key, value, mask=None):
        q, k, v = self.split(self.w_q(query)), self.split(self.w_k(key)), self.split(self.w_v(value))
        out, weights = self.attend(q, k, v, mask)
        B, h, n, d_h = out.shape
        out = out.transpose(1, 2).reshape(B, n, -1) if self.merge_transpose else out.reshape(B, n, -1)
        if self.use_w_o:
            out = self.w_o(out)
        return out, (weights.mean(1) if self.average_heads else weights)


def variant(**switches):
    return type("Variant", (LearnerMHA,), {"check_divisible": True, **switches})


Checked = variant()


class EinsumMHA(nn.Module):
    """A correct multi-head attention written with einsum and explicit head axes."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        q, k, v = (w(t).unflatten(-1, (self.h, -1)) for w, t in
                   ((self.w_q, query), (self.w_k, key), (self.w_v, value)))  # (B, n, h, d_h)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, -1e9)
        weights = scores.softmax(-1)
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).flatten(2)
        return self.w_o(out), weights


class CallsReference(Checked):
    def attend(self, q, k, v, mask):
        _, weights = super().attend(q, k, v, mask)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


class Aliased(Checked):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias)
        self.w_k = self.w_q


class KeysFromQuery(Checked):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, query, value, mask)


class ValuesFromKey(Checked):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, key, mask)


class MaskIgnored(Checked):
    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, None)


class OneHead(Checked):
    def __init__(self, d_model, num_heads, bias=True):
        super().__init__(d_model, num_heads, bias)
        self.h = 1


def answers(solution):
    return [
        right("solution", solution["MultiHeadAttention"]),
        right("EinsumMHA", EinsumMHA),
        right("LearnerMHA", Checked),
        bug("split without transpose", variant(split_transpose=False),
            hidden="splitting the heads without the transpose", mistake=SPLIT),
        bug("merge without transpose", variant(merge_transpose=False),
            hidden="merging the heads without the transpose", mistake=MERGE),
        bug("no W_O", variant(use_w_o=False), hidden="missing output projection", mistake=NO_W_O),
        bug("scale sqrt(d_model)", variant(scale_by_d_model=True),
            hidden=r"sqrt\(d_model\) instead of sqrt\(d_k\)", mistake=D_MODEL),
        bug("mask inverted", variant(invert_mask=True), hidden="mask inverted", mistake=INVERTED),
        bug("heads averaged", variant(average_heads=True), hidden="weights.* should have shape"),
        bug("bias always", variant(force_bias=True), hidden="should not have a bias"),
        bug("no ValueError", type("NoCheck", (LearnerMHA,), {}), hidden="should raise ValueError"),
        bug("calls F.scaled_dot_product_attention", CallsReference,
            hidden="No credit.*scaled_dot_product_attention"),
        bug("w_k is w_q (aliased)", Aliased),
        bug("keys from the query", KeysFromQuery),
        bug("values from the key", ValuesFromKey, mistake=VALUES),
        bug("mask ignored", MaskIgnored, mistake=NO_MASK),
        bug("num_heads ignored", OneHead),
        bug("bias ignored (never a bias)", variant(force_bias=False)),
        bug("a tensor on a fixed device", on_a_fixed_device(solution["MultiHeadAttention"]),
            hidden=ON_A_FIXED_DEVICE),
    ]
