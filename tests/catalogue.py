"""Every right answer and every planted bug the suite knows, per exercise, for comparing the
visible tests (the test cells' code before the hidden block) with the hidden checks.

The implementations come from the hidden checks' own tests (``tests/test_checks_s10_*.py``)
plus the bugs this module adds: aliased submodules, inputs of other ranks, each option of
each module, each sentence of the 10.6 model's specification. A bug that only grading can
see is marked with why: a call to the reference the exercise is graded against, or a tensor
created on a fixed device (found by running on another device).

``python -m tests.catalogue`` prints the table of what each side catches.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from samples import load_solution_namespace, run_visible_test
from tests.answers import DEVICE, REFERENCE, Answer, Entry, assignment_of, declared, declared_sections


def outcome(run) -> BaseException | None:
    """None when ``run()`` passes, else what it raised (AssertionError or any error)."""
    try:
        run()
    except Exception as error:  # noqa: BLE001 - a learner-like implementation may raise anything
        return error
    return None


def message(failure: BaseException | None) -> str | None:
    return None if failure is None else f"{type(failure).__name__}: {failure}"


def run_visible(entry: Entry) -> BaseException | None:
    return outcome(lambda: run_visible_test(entry.assignment, entry.exercise, entry.impl))


def run_hidden(entry: Entry) -> BaseException | None:
    module = importlib.import_module(f"grader.checks.s{entry.section.replace('.', '_')}")
    return outcome(lambda: getattr(module, f"check_{entry.exercise}")(entry.impl))


GENERIC = re.compile(r".* differs from .*: (the largest difference is .*|\d+ entries are inf or NaN)\.")


def names_the_mistake(failure: BaseException | None) -> bool:
    """Does a failure name a known mistake, or say more than "X differs from Y in case Z: the
    largest difference is ... at index ..." (what to fix, which property breaks)?"""
    if failure is None:
        return False
    if getattr(failure, "mistake", None) is not None:
        return True
    lines = [line for line in str(failure).strip().splitlines() if line.strip()]
    return not (len(lines) == 1 and GENERIC.fullmatch(lines[0]))


# ---------------------------------------------------------------- helpers for the test modules


def _tests(section: str):
    """The test module of a section, with the notebook's given code as its globals."""
    module = importlib.import_module(f"tests.test_checks_s{section.replace('.', '_')}")
    namespace = load_solution_namespace(assignment_of(section))
    if section == "10.5":
        module.MultiHeadAttention = namespace["MultiHeadAttention"]
        module.FeedForwardSolution = namespace["FeedForward"]
    if section == "10.6":
        for name in module.GIVEN:
            setattr(module, name, namespace[name])
    return module, namespace


# ---------------------------------------------------------------- new planted bugs: 10.2


def softmax_dim1(x, dim=-1):
    """The axis fixed to 1."""
    e = (x - x.amax(1, keepdim=True)).exp()
    return e / e.sum(1, keepdim=True)


def softmax_unsqueeze_last(x, dim=-1):
    """keepdim replaced by unsqueeze(-1): right only for the last axis."""
    e = (x - x.max(dim).values.unsqueeze(-1)).exp()
    return e / e.sum(dim).unsqueeze(-1)


def attention_transpose_12(Q, K, V, mask=None):
    """3-D only: K.transpose(1, 2)."""
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_dot_T(Q, K, V, mask=None):
    """2-D only: K.T reverses every axis of a batch (spelled out: .T warns on batches)."""
    scores = Q @ K.permute(*reversed(range(K.dim()))) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_scale_nq(Q, K, V, mask=None):
    """Scaled by sqrt(n_q) (shape[-2]) instead of sqrt(d_k)."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-2])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_square_mask(Q, K, V, mask=None):
    """Assumes n_q == n_k: builds its own (n, n) view of the mask."""
    n = Q.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask.expand(*scores.shape[:-2], n, n), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


# ---------------------------------------------------------------- new planted bugs: 10.3


def split_h_dh_swapped(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, d // num_heads, num_heads).transpose(1, 2)


def _mha_bugs(T):
    class Aliased(T.LearnerMHA):
        check_divisible = True

        def __init__(self, d_model, num_heads, bias=True):
            super().__init__(d_model, num_heads, bias)
            self.w_k = self.w_q

    class KeysFromQuery(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, query, value, mask)

    class ValuesFromKey(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, key, mask)

    class MaskIgnored(T.LearnerMHA):
        check_divisible = True

        def forward(self, query, key, value, mask=None):
            return super().forward(query, key, value, None)

    class OneHead(T.LearnerMHA):
        check_divisible = True

        def __init__(self, d_model, num_heads, bias=True):
            super().__init__(d_model, num_heads, bias)
            self.h = 1

    return {"w_k is w_q (aliased)": Aliased, "keys from the query": KeysFromQuery,
            "values from the key": ValuesFromKey, "mask ignored": MaskIgnored, "num_heads ignored": OneHead,
            "bias ignored (never a bias)": T.variant(force_bias=False)}


# ---------------------------------------------------------------- new planted bugs: 10.4


def pe_odd_last_zero(max_len, d_model):
    """Odd d_model: the last sine column left at zero."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model - 1, 2, dtype=torch.float64)
    angle = position / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0:2 * angle.shape[1]:2] = angle.sin()
    pe[:, 1:2 * angle.shape[1]:2] = angle.cos()
    return pe.float()


def _pe_bugs(T):
    class IgnoresMaxLen(T.PEBase):
        def __init__(self, d_model, max_len=5000, dropout=0.0):
            super().__init__(d_model, 5000, dropout)

    class SlicesMaxLen(T.PEBase):
        def forward(self, x):
            if x.shape[1] > self.pe.shape[0]:
                raise ValueError("too long")
            return self.dropout(x + self.pe[: x.shape[1]].flip(0))

    return {"max_len ignored": IgnoresMaxLen, "pe read backwards": SlicesMaxLen}


def shift_abs_k(k, d_model):
    """|k| instead of k: negative shifts go forward."""
    from tests.test_checks_s10_4 import shift_block_diag
    return shift_block_diag(abs(k), d_model)


def shift_halves(k, d_model):
    """Pairs (i, i + d/2) instead of (2i, 2i+1)."""
    if d_model % 2:
        raise ValueError("odd")
    half = d_model // 2
    M = torch.zeros(d_model, d_model)
    for i in range(half):
        b = k / 10000 ** (2 * i / d_model)
        M[i, i] = M[i + half, i + half] = math.cos(b)
        M[i, i + half], M[i + half, i] = math.sin(b), -math.sin(b)
    return M


def _rotary_bugs(T):
    def rows_reversed(x, positions=None, base=10000.0):
        """Right for one sequence; with a batch the sequences come back in reverse order."""
        out = T.rotary_complex(x, positions, base)
        return out.flip(0) if x.dim() > 2 else out

    def detached(x, positions=None, base=10000.0):
        return T.rotary_complex(x.detach(), positions, base)

    def gradient_turned_forward(x, positions=None, base=10000.0):
        """Right values, and a hand-written backward that turns the gradient forward, not back."""
        class Rotate(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return T.rotary_complex(x, positions, base)

            @staticmethod
            def backward(ctx, grad):
                return T.rotary_complex(grad, positions, base)

        return Rotate.apply(x)

    return {"batch rows reversed": rows_reversed, "detached": detached,
            "gradient turned forward": gradient_turned_forward}


# ---------------------------------------------------------------- new planted bugs: 10.5


def _block_bugs(T):
    class FFNAlwaysGelu(T.FFNBase):
        def phi(self, h):
            return F.gelu(h)

    class BlockActivationIgnored(T.BlockBase):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
            super().__init__(d_model, num_heads, d_ff, dropout, "relu", norm_first)
            if activation not in ("relu", "gelu"):
                raise ValueError(activation)

    class BlockDropoutIgnored(T.BlockBase):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
            super().__init__(d_model, num_heads, d_ff, 0.0, activation, norm_first)

    class BlockFFNSharedAttention(T.BlockBase):
        """The pre-norm input normalised with norm1 for both sublayers, norm2 never used."""

        def forward(self, x, mask=None):
            if not self.norm_first:
                return super().forward(x, mask)
            x = x + self.sa(self.norm1(x), mask)
            return x + self.ff(self.norm1(x))

    return ({"gelu although activation='relu'": FFNAlwaysGelu},
            {"activation not passed to FeedForward": BlockActivationIgnored,
             "dropout not passed on": BlockDropoutIgnored,
             "pre-norm: norm1 for both": BlockFFNSharedAttention})


# ---------------------------------------------------------------- new planted bugs: 10.6


def _decoder_bugs(T):
    class SharedAttention(T.DecoderBase):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.cross_attn = self.self_attn

    class ActivationIgnored(T.DecoderBase):
        def __init__(self, d_model, num_heads, d_ff, dropout=0.0, activation="relu", norm_first=False):
            super().__init__(d_model, num_heads, d_ff, dropout, "relu", norm_first)

    class SharedNorm(T.DecoderBase):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.norm3 = self.norm2

    return {"cross_attn is self_attn (aliased)": SharedAttention, "activation ignored": ActivationIgnored,
            "norm3 is norm2 (aliased)": SharedNorm}


def _transformer_bugs(T):
    class NoSourcePositions(T.TransformerBase):
        def encode(self, src, src_mask):
            x = self.embed(self.src_embed, src, positions=False)
            for layer in self.encoder_layers:
                x = layer(x, mask=src_mask)
            return self.encoder_norm(x)

    class IgnoresMaxLen(T.TransformerBase):
        def __init__(self, *args, max_len=64, **kwargs):
            super().__init__(*args, **kwargs)
            self.pos_encoding = T.PositionalEncoding(self.out.in_features)

    class DecoderCountFromEncoder(T.TransformerBase):
        def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                     num_encoder_layers=2, num_decoder_layers=2, **kwargs):
            super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                             num_encoder_layers, **kwargs)

    class RepeatedBlock(T.TransformerBase):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.encoder_layers = nn.ModuleList([self.encoder_layers[0]] * len(self.encoder_layers))

    class BlocksAlwaysPostNorm(T.TransformerBase):
        def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                     num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                     norm_first=False, max_len=64, pad_id=0):
            super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                             num_decoder_layers, dropout, activation, norm_first, max_len, pad_id)
            options = dict(dropout=dropout, activation=activation)  # norm_first forgotten
            self.encoder_layers = nn.ModuleList(
                [T.TransformerBlock(d_model, num_heads, d_ff, **options) for _ in range(num_encoder_layers)])
            self.decoder_layers = nn.ModuleList(
                [T.DecoderBlock(d_model, num_heads, d_ff, **options) for _ in range(num_decoder_layers)])

    class BlocksAlwaysRelu(T.TransformerBase):
        def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, num_heads=4, d_ff=128,
                     num_encoder_layers=2, num_decoder_layers=2, dropout=0.0, activation="relu",
                     norm_first=False, max_len=64, pad_id=0):
            super().__init__(src_vocab_size, tgt_vocab_size, d_model, num_heads, d_ff, num_encoder_layers,
                             num_decoder_layers, dropout, "relu", norm_first, max_len, pad_id)

    class NoEncoderNorm(T.TransformerBase):
        def encode(self, src, src_mask):
            x = self.embed(self.src_embed, src)
            for layer in self.encoder_layers:
                x = layer(x, mask=src_mask)
            return x

    class SoftmaxOutput(T.TransformerBase):
        def decode(self, tgt, memory, src_mask):
            return torch.softmax(super().decode(tgt, memory, src_mask), dim=-1)

    class CausalOnCPU(T.TransformerBase):
        def target_mask(self, tgt):
            return T.causal_mask(tgt.shape[1])  # on the CPU whatever tgt's device

    return [("no source positions", NoSourcePositions, None), ("max_len ignored", IgnoresMaxLen, None),
            ("decoder blocks counted with num_encoder_layers", DecoderCountFromEncoder, None),
            ("one encoder block repeated (aliased)", RepeatedBlock, None),
            ("norm_first not passed to the blocks", BlocksAlwaysPostNorm, None),
            ("activation not passed to the blocks", BlocksAlwaysRelu, None),
            ("pre-norm: encoder_norm not applied", NoEncoderNorm, None),
            ("probabilities returned instead of logits", SoftmaxOutput, None),
            ("causal mask on the CPU", CausalOnCPU, DEVICE)]


@torch.no_grad()
def greedy_argmax_batch(model, src, bos_id, eos_id, max_len):
    """The argmax over the batch axis instead of the vocabulary."""
    mask = (src != model.pad_id)[:, None, None, :]
    memory = model.encode(src, mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    while ys.shape[1] < max_len:
        word = model.decode(ys, memory, mask)[:, -1].argmax(0).expand(src.shape[0])
        ys = torch.cat([ys, word[:, None]], dim=1)
        if (ys == eos_id).any(1).all():
            break
    return ys


# ---------------------------------------------------------------- the catalogue


def build() -> list[Entry]:
    """Every right answer and planted bug, in course order: the declared ones (tests/answers/),
    then those of the sections not yet declared there (listed below until they move)."""
    entries: list[Entry] = []
    for section in declared_sections():
        entries += declared(section, load_solution_namespace(assignment_of(section)))

    def right(section, exercise, label, impl):
        if section not in declared_sections():
            entries.append(Entry(section, exercise, Answer(label, impl, True)))

    def bug(section, exercise, label, impl, only=None):
        if section not in declared_sections():
            entries.append(Entry(section, exercise, Answer(label, impl, False, grading_only=only)))

    T, ns = _tests("10.2")
    right("10.2", "softmax", "solution", ns["softmax"])
    for f in (T.softmax_logsumexp, T.softmax_max_values):
        right("10.2", "softmax", f.__name__, f)
    for f, only in ((T.softmax_naive, None), (T.softmax_last_axis, None), (T.softmax_global, None),
                    (T.softmax_torch, REFERENCE), (T.softmax_method, REFERENCE), (T.softmax_no_keepdim, None),
                    (softmax_dim1, None), (softmax_unsqueeze_last, None)):
        bug("10.2", "softmax", f.__name__, f, only)
    right("10.2", "scaled_dot_product_attention", "solution", ns["scaled_dot_product_attention"])
    for f in (T.attention_einsum, T.attention_minus_1e9):
        right("10.2", "scaled_dot_product_attention", f.__name__, f)
    A = T._attention
    for label, f, only in (
            ("no scaling", A(scale=lambda Q: 1.0), None), ("scale d_k", A(scale=lambda Q: Q.shape[-1]), None),
            ("softmax over queries", A(dim=-2), None), ("mask inverted", A(invert=True), None),
            ("mask after softmax", A(after=True), None), ("masked scores 0", A(fill=0.0), None),
            ("naive softmax", A(softmax=lambda s, dim: T.softmax_naive(s, dim)), None),
            ("calls F.scaled_dot_product_attention", T.attention_calls_reference, REFERENCE),
            ("fixed device", T.attention_fixed_device, DEVICE),
            ("outputs swapped", T.attention_swapped_outputs, None),
            ("scale by d_v", T.attention_scale_dv, None),
            ("K.transpose(1, 2): 3-D only", attention_transpose_12, None),
            ("K.T: 2-D only", attention_dot_T, None), ("scale by sqrt(n_q)", attention_scale_nq, None),
            ("mask assumed square", attention_square_mask, None)):
        bug("10.2", "scaled_dot_product_attention", label, f, only)
    right("10.2", "dot_product_variance", "solution", ns["dot_product_variance"])
    right("10.2", "dot_product_variance", "a 0-d tensor", T.variance_as_tensor)
    for f in (T.variance_no_scaling, T.variance_scaled_by_dk, T.variance_uniform):
        bug("10.2", "dot_product_variance", f.__name__, f)

    T, ns = _tests("10.3")
    right("10.3", "split_heads", "solution", ns["split_heads"])
    right("10.3", "merge_heads", "solution", ns["merge_heads"])
    for f in (T.split_unflatten, T.split_chunks):
        right("10.3", "split_heads", f.__name__, f)
    for f in (T.merge_permute, T.merge_cat):
        right("10.3", "merge_heads", f.__name__, f)
    bug("10.3", "split_heads", "split_no_transpose", T.split_no_transpose)
    bug("10.3", "split_heads", "h and d_h swapped", split_h_dh_swapped)
    for f in (T.merge_no_transpose, T.merge_view, T.merge_heads_last):
        bug("10.3", "merge_heads", f.__name__, f)
    right("10.3", "MultiHeadAttention", "solution", ns["MultiHeadAttention"])
    right("10.3", "MultiHeadAttention", "EinsumMHA", T.EinsumMHA)
    right("10.3", "MultiHeadAttention", "LearnerMHA", T.variant())
    V = T.variant
    for label, cls, only in (
            ("split without transpose", V(split_transpose=False), None),
            ("merge without transpose", V(merge_transpose=False), None), ("no W_O", V(use_w_o=False), None),
            ("scale sqrt(d_model)", V(scale_by_d_model=True), None),
            ("mask inverted", V(invert_mask=True), None),
            ("heads averaged", V(average_heads=True), None), ("bias always", V(force_bias=True), None),
            ("no ValueError", type("NoCheck", (T.LearnerMHA,), {}), None),
            ("calls F.scaled_dot_product_attention", T.CallsReference, REFERENCE),
            *((label, cls, None) for label, cls in _mha_bugs(T).items())):
        bug("10.3", "MultiHeadAttention", label, cls, only)

    T, ns = _tests("10.4")
    right("10.4", "sinusoidal_positional_encoding", "solution", ns["sinusoidal_positional_encoding"])
    for f in (T.pe_complex, T.pe_loop, T.pe_float32):
        right("10.4", "sinusoidal_positional_encoding", f.__name__, f)
    for f in (T.pe_swapped, T.pe_exponent_i, T.pe_exponent_doubled, T.pe_from_one, T.pe_inverted, T.pe_halves,
              T.pe_float64, T.pe_even_only, T.pe_batched, T.pe_base_1000, T.pe_cos_own_column, T.pe_cos_typo,
              T.pe_halved, pe_odd_last_zero):
        bug("10.4", "sinusoidal_positional_encoding", f.__name__, f)
    right("10.4", "PositionalEncoding", "solution", ns["PositionalEncoding"])
    for cls in (T.PEFromLoop, T.PEBase):
        right("10.4", "PositionalEncoding", cls.__name__, cls)
    for cls in (T.PEPlainAttribute, T.PEParameter, T.PENotPersistent, T.PEThreeD, T.PENoLengthCheck,
                T.PEScaled,
                T.PEFromOne, T.PEDropoutOnPE, T.PEAlwaysDropout):
        bug("10.4", "PositionalEncoding", cls.__name__, cls)
    bug("10.4", "PositionalEncoding", "PEFixedDevice", T.PEFixedDevice, DEVICE)
    for label, cls in _pe_bugs(T).items():
        bug("10.4", "PositionalEncoding", label, cls)
    right("10.4", "relative_shift_matrix", "solution", ns["relative_shift_matrix"])
    for f in (T.shift_block_diag, T.shift_loop_float64):
        right("10.4", "relative_shift_matrix", f.__name__, f)
    for f in (T.shift_textbook_rotation, T.shift_exponent_i, T.shift_same_angle, T.shift_inverted,
              T.shift_no_error, T.shift_wrong_size, shift_abs_k, shift_halves):
        bug("10.4", "relative_shift_matrix", f.__name__, f)
    right("10.4", "apply_rotary", "solution", ns["apply_rotary"])
    for f in (T.rotary_complex, T.rotary_matrices, T.rotary_float32_cached, T.rotary_loop):
        right("10.4", "apply_rotary", f.__name__, f)
    for label, (f, _) in T.ROTARY_BUGS.items():
        bug("10.4", "apply_rotary", label, f, DEVICE if label == "tensors on a fixed device" else None)
    for label, f in _rotary_bugs(T).items():
        bug("10.4", "apply_rotary", label, f)

    T, ns = _tests("10.5")
    ffn_bugs, block_bugs = _block_bugs(T)
    right("10.5", "FeedForward", "solution", ns["FeedForward"])
    for cls in (T.FFNBase, T.FFNErfGelu, T.FFNSequential):
        right("10.5", "FeedForward", cls.__name__, cls)
    for cls in (T.FFNNoActivation, T.FFNAlwaysRelu, T.FFNTanhGelu, T.FFNActivationTwice, T.FFNNoValueError,
                T.FFNDropoutAlwaysOn, T.FFNDropoutIgnored, T.FFNOtherNames, T.FFNNoBias):
        bug("10.5", "FeedForward", cls.__name__, cls)
    for label, cls in ffn_bugs.items():
        bug("10.5", "FeedForward", label, cls)
    right("10.5", "TransformerBlock", "solution", ns["TransformerBlock"])
    for cls in (T.BlockBase, T.BlockFunctional):
        right("10.5", "TransformerBlock", cls.__name__, cls)
    for cls in (T.BlockNormSublayer, T.BlockNormInput, T.BlockNormedResidual, T.BlockNormFirstIgnored,
                T.BlockAlwaysPre, T.BlockNoActivation, T.BlockNormsSwapped, T.BlockSharedNorm,
                T.BlockNorm1Twice,
                T.BlockMaskInverted, T.BlockMaskIgnored, T.BlockNoResidual, T.BlockEps, T.BlockNoValueError,
                T.BlockDropoutAlwaysOn):
        bug("10.5", "TransformerBlock", cls.__name__, cls)
    bug("10.5", "TransformerBlock", "BlockTorchInside", T.BlockTorchInside, REFERENCE)
    for label, cls in block_bugs.items():
        bug("10.5", "TransformerBlock", label, cls)

    T, ns = _tests("10.6")
    for name in ("causal_mask", "padding_mask", "DecoderBlock", "Transformer", "greedy_decode"):
        right("10.6", name, "solution", ns[name])
    for f in (T.causal_arange, T.causal_not_triu, T.causal_float_compare):
        right("10.6", "causal_mask", f.__name__, f)
    for label, (f, _) in T.CAUSAL_BUGS.items():
        bug("10.6", "causal_mask", label, f, DEVICE if label == "ignores device" else None)
    for f in (T.padding_unsqueeze, T.padding_view):
        right("10.6", "padding_mask", f.__name__, f)
    for label, (f, _) in T.PADDING_BUGS.items():
        bug("10.6", "padding_mask", label, f)
    for cls in (T.DecoderBase, T.DecoderFunctionalDropout):
        right("10.6", "DecoderBlock", cls.__name__, cls)
    for label, (cls, _) in T.DECODER_BUGS.items():
        bug("10.6", "DecoderBlock", label, cls, REFERENCE if "MultiheadAttention" in label else None)
    for label, cls in _decoder_bugs(T).items():
        bug("10.6", "DecoderBlock", label, cls)
    for cls in (T.TransformerBase, T.TransformerTargetPadding):
        right("10.6", "Transformer", cls.__name__, cls)
    for label, (cls, _) in T.TRANSFORMER_BUGS.items():
        bug("10.6", "Transformer", label, cls)
    for label, cls, only in _transformer_bugs(T):
        bug("10.6", "Transformer", label, cls, only)
    for f in (T.greedy_one_by_one, T.greedy_pad_after_eos):
        right("10.6", "greedy_decode", f.__name__, f)
    for label, (f, _) in T.GREEDY_BUGS.items():
        bug("10.6", "greedy_decode", label, f)
    bug("10.6", "greedy_decode", "argmax over the batch", greedy_argmax_batch)
    right("10.6", "greedy_decode_cached", "solution", ns["greedy_decode_cached"])
    for f in (T.cached_lists_einsum, T.cached_drops_finished):
        right("10.6", "greedy_decode_cached", f.__name__, f)
    for label, (make, _) in T.CACHED_BUGS.items():
        bug("10.6", "greedy_decode_cached", label, make(ns), DEVICE if "fixed device" in label else None)
    right("10.6", "beam_search", "solution", ns["beam_search"])
    for f in (T.beam_lists, T.beam_no_early_stop):
        right("10.6", "beam_search", f.__name__, f)
    for label, (f, _) in T.BEAM_BUGS.items():
        bug("10.6", "beam_search", label, f)
    return entries


# ---------------------------------------------------------------- the table


def table(entries: list[Entry]) -> tuple[str, dict]:
    """Run every planted bug through both sides; the markdown table and the totals."""
    rows, totals = [], {"planted": 0, "hidden": 0, "visible": 0, "visible of hidden": 0, "named": 0,
                        "grading only": 0, "missed": []}
    exercises = list(dict.fromkeys((e.section, e.exercise) for e in entries))
    header = ("| section | exercise | planted bugs | hidden catch | visible catch | visible names the "
              "mistake | only grading can see (why) |\n|---|---|---:|---:|---:|---:|---|")
    for section, exercise in exercises:
        bugs = [e for e in entries if (e.section, e.exercise) == (section, exercise) and not e.correct]
        counts = {"hidden": 0, "visible": 0, "named": 0}
        only = [f"{e.label} ({e.grading_only})" for e in bugs if e.grading_only]
        for e in bugs:
            if e.grading_only:
                continue
            hidden, visible = run_hidden(e), run_visible(e)
            counts["hidden"] += hidden is not None
            counts["visible"] += visible is not None
            counts["named"] += names_the_mistake(visible)
            totals["visible of hidden"] += hidden is not None and visible is not None
            if hidden is not None and visible is None:
                totals["missed"].append(f"{section} {exercise}: {e.label}")
        considered = len(bugs) - len(only)
        rows.append(f"| {section} | `{exercise}` | {considered} | {counts['hidden']} | {counts['visible']} | "
                    f"{counts['named']} | {'; '.join(only)} |")
        totals["planted"] += considered
        totals["grading only"] += len(only)
        for key in ("hidden", "visible", "named"):
            totals[key] += counts[key]
    rows.append(f"| **all** | | **{totals['planted']}** | **{totals['hidden']}** | **{totals['visible']}** | "
                f"**{totals['named']}** | {totals['grading only']} more |")
    return header + "\n" + "\n".join(rows), totals


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    torch.set_num_threads(1)
    started = time.perf_counter()
    entries = build()
    text, totals = table(entries)
    print(text)
    ratio = totals["visible of hidden"] / max(1, totals["hidden"])
    print(f"\nVisible tests catch {totals['visible of hidden']} of the {totals['hidden']} bugs the hidden "
          f"checks catch ({ratio:.1%}); they name the mistake for {totals['named']} of {totals['visible']}.")
    if totals["missed"]:
        print("Caught only by the hidden checks: " + "; ".join(totals["missed"]))
    right = [e for e in entries if e.correct]
    rejected = [f"{e.section} {e.exercise} {e.label}" for e in right
                if run_visible(e) is not None or run_hidden(e) is not None]
    print(f"{len(right)} right answers: {len(right) - len(rejected)} pass both sides"
          + (f"; rejected: {rejected}" if rejected else "."))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0 if ratio >= 0.95 and not rejected else 1


if __name__ == "__main__":
    sys.exit(main())

