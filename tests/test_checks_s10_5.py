"""Do the hidden checks of 10.5 (feed-forward network, block) accept right and reject wrong code?"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.checks import s10_5
from tests.check_helpers import assert_fails

ASSIGNMENT = "10.5-transformer-block"
MultiHeadAttention = FeedForwardSolution = None  # the notebook's: set by given_code below


@pytest.fixture(autouse=True, scope="module")
def given_code(solution):
    """The notebook's given MultiHeadAttention (read-only for the learner) and the solution's
    FeedForward, as this module's globals for the classes below (loaded at the first test)."""
    globals().update(MultiHeadAttention=solution["MultiHeadAttention"],
                     FeedForwardSolution=solution["FeedForward"])


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_solution_passes(solution):
    """Does the reference solution pass both checks?"""
    s10_5.check_FeedForward(solution["FeedForward"])
    s10_5.check_TransformerBlock(solution["TransformerBlock"])


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.5 exercise by name?"""
    from grader.checks import EXERCISES, SECTIONS

    assert SECTIONS["10.5"] is s10_5
    assert EXERCISES["FeedForward"].name == "FeedForward"
    assert EXERCISES["TransformerBlock"].name == "TransformerBlock"


# ---------------------------------------------------------------- FeedForward


class FFNBase(nn.Module):
    """A right answer written without nn.Sequential or activation modules; planted bugs change one piece."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(activation)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.activation = activation
        self.p = dropout

    def phi(self, h):
        return h.clamp(min=0) if self.activation == "relu" else F.gelu(h)

    def forward(self, x):
        return self.linear2(F.dropout(self.phi(self.linear1(x)), self.p, self.training))


class FFNErfGelu(FFNBase):
    """A right answer: GELU written out with erf."""

    def phi(self, h):
        if self.activation == "relu":
            return torch.relu(h)
        return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


class FFNSequential(nn.Module):
    """A right answer with the activation chosen from a dict of modules and dropout after it."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.act = {"relu": nn.ReLU, "gelu": nn.GELU}[activation]() if activation in ("relu", "gelu") \
            else None
        if self.act is None:
            raise ValueError(f"unknown activation {activation}")
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.drop(self.act(self.linear1(x))))


@pytest.mark.parametrize("impl", [FFNBase, FFNErfGelu, FFNSequential])
def test_ffn_variants_pass(impl):
    """Are clamp/F.gelu, a hand-written erf GELU and activation modules accepted?"""
    s10_5.check_FeedForward(impl)


class FFNNoActivation(FFNBase):
    def phi(self, h):
        return h


class FFNAlwaysRelu(FFNBase):
    def phi(self, h):
        return F.relu(h)


class FFNTanhGelu(FFNBase):
    def phi(self, h):
        return F.relu(h) if self.activation == "relu" else F.gelu(h, approximate="tanh")


class FFNActivationTwice(FFNBase):
    def forward(self, x):
        return self.phi(super().forward(x))


class FFNNoValueError(FFNBase):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__(d_model, d_ff, "gelu" if activation == "gelu" else "relu", dropout)


class FFNDropoutAlwaysOn(FFNBase):
    def forward(self, x):
        return self.linear2(F.dropout(self.phi(self.linear1(x)), self.p, training=True))


class FFNDropoutIgnored(FFNBase):
    def forward(self, x):
        return self.linear2(self.phi(self.linear1(x)))


class FFNOtherNames(nn.Module):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class FFNNoBias(FFNBase):
    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__(d_model, d_ff, activation, dropout)
        self.linear1 = nn.Linear(d_model, d_ff, bias=False)
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)


@pytest.mark.parametrize("impl, match", [
    (FFNNoActivation, "without its activation"),
    (FFNAlwaysRelu, "ReLU used although activation='gelu'"),
    (FFNTanhGelu, "tanh approximation of GELU"),
    (FFNActivationTwice, "activation after linear2"),
    (FFNNoValueError, "should raise ValueError for activation='tanh'"),
    (FFNDropoutAlwaysOn, r"eval\(\) mode"),
    (FFNDropoutIgnored, r"train\(\) mode"),
    (FFNOtherNames, "wrong parameters.*linear1"),
    (FFNNoBias, "wrong parameters.*missing linear1.bias"),
])
def test_ffn_planted_bugs_fail(impl, match):
    """Is each wrong feed-forward network rejected, with the diagnosis named?"""
    assert_fails(s10_5.check_FeedForward, impl, match)


# ---------------------------------------------------------------- TransformerBlock


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


@pytest.mark.parametrize("impl", [BlockBase, BlockFunctional])
def test_block_variants_pass(impl):
    """Are a spelled-out block and one with functional layer norms and a keyword mask accepted?"""
    s10_5.check_TransformerBlock(impl)


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


@pytest.mark.parametrize("impl, match", [
    (BlockNormSublayer, r"norm before the residual add.*x \+ LN\(Sublayer\(x\)\)"),
    (BlockNormInput, r"norm before the residual add: LN\(x\) \+ Sublayer\(x\)"),
    (BlockNormedResidual, "residual taken from the normalised input"),
    (BlockNormFirstIgnored, "norm_first ignored"),
    (BlockAlwaysPre, "pre-norm computed although norm_first=False"),
    (BlockNoActivation, "without its activation"),
    (BlockNormsSwapped, "norm1 and norm2 swapped"),
    (BlockSharedNorm, "one shared LayerNorm"),
    (BlockNorm1Twice, r"one LayerNorm \(norm1\) used for both"),
    (BlockMaskInverted, "mask inverted"),
    (BlockMaskIgnored, "mask not passed"),
    (BlockNoResidual, "missing residual"),
    (BlockTorchInside, "No credit.*multi_head_attention_forward"),
    (BlockEps, "eps=1e-06.*default eps=1e-5"),
    (BlockNoValueError, "should raise ValueError for activation='tanh'"),
    (BlockDropoutAlwaysOn, r"eval\(\) mode"),
])
def test_block_planted_bugs_fail(impl, match):
    """Is each wrong block rejected, with the diagnosis named?"""
    assert_fails(s10_5.check_TransformerBlock, impl, match)


def test_reference_takes_the_plain_path():
    """Does the reference run nn.TransformerEncoderLayer in train mode, off the fused fast path?"""
    case = s10_5.BLOCK_CASES[0]
    calls = []

    class Spy(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(torch.overrides.resolve_name(func) or "")
            return func(*args, **(kwargs or {}))

    with Spy():
        s10_5._torch_block(case, torch.device("cpu"))
    assert "torch.nn.functional.multi_head_attention_forward" in calls
    assert "torch._transformer_encoder_layer_fwd" not in calls


def test_layer_norm_weights_are_random():
    """Are the LayerNorm weights and biases randomised, so swapped or shared norms cannot hide?"""
    case = s10_5.BLOCK_CASES[0]
    _, _, p = s10_5.block_inputs(case, torch.device("cpu"))
    assert not torch.allclose(p["norm1.weight"], torch.ones_like(p["norm1.weight"]))
    assert not torch.allclose(p["norm1.weight"], p["norm2.weight"])
    assert not torch.allclose(p["norm1.bias"], torch.zeros_like(p["norm1.bias"]))
