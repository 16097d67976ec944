"""Do the hidden checks of 10.6 (masks, decoder block, Transformer, greedy decoding) accept
right and reject wrong code?"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.samples import run_visible_test
from grader.checks import s10_6
from grader.checks.core import close, grading_device, tolerance
from tests.check_helpers import assert_fails, assert_passes

ASSIGNMENT = "10.6-encoder-decoder"
NAMES = ("causal_mask", "padding_mask", "DecoderBlock", "Transformer", "greedy_decode",
         "greedy_decode_cached", "beam_search")
#: Given to the learner (read-only) or written in earlier exercises of the notebook.
GIVEN = ("MultiHeadAttention", "FeedForward", "TransformerBlock", "PositionalEncoding",
         "causal_mask", "padding_mask", "DecoderBlock")
MultiHeadAttention = FeedForward = TransformerBlock = PositionalEncoding = None  # set by given_code
causal_mask = padding_mask = DecoderBlock = None


@pytest.fixture(autouse=True, scope="module")
def given_code(solution):
    """The notebook's given classes and earlier answers, as this module's globals for the
    right and wrong answers below (loaded at the first test, not at import)."""
    globals().update({name: solution[name] for name in GIVEN})


def implementation(impl, solution):
    """``impl``, or the solution's object of that name when ``impl`` is a string."""
    return solution[impl] if isinstance(impl, str) else impl


def name_of(impl) -> str:
    return impl if isinstance(impl, str) else impl.__name__


def check_solution(solution) -> None:
    for name in NAMES:
        getattr(s10_6, f"check_{name}")(solution[name])


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Hundreds of tiny tensor ops: one thread avoids waking (and waiting for) the others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_solution_passes(solution):
    """Does the reference solution pass all seven checks?"""
    check_solution(solution)


def test_every_exercise_is_registered():
    """Can the clean-process verifier find every 10.6 exercise by name?"""
    from grader.checks import EXERCISES, SECTIONS

    assert SECTIONS["10.6"] is s10_6
    for name in NAMES:
        assert EXERCISES[name].name == name


def test_records_verify_in_a_clean_process(tmp_path, monkeypatch, solution):
    """Do the solution's saved records pass the clean-process verification?"""
    from grader.autograde.verify import verify_records

    monkeypatch.setenv("COURSE_GRADING_DIR", str(tmp_path))
    check_solution(solution)
    verdicts = verify_records(tmp_path)
    assert set(verdicts) == set(NAMES)
    assert all(v.passed for v in verdicts.values()), {k: v.reason for k, v in verdicts.items()}


# ---------------------------------------------------------------- the checks' own machinery


@pytest.mark.parametrize("case", s10_6.DECODER_CASES, ids=str)
def test_functional_decoder_block_matches_torch(case):
    """Does the functional block the diagnoses come from agree with nn.TransformerDecoderLayer?"""
    device = grading_device()
    got = s10_6._functional_decoder_outputs(case, device)
    want = s10_6.DecoderBlockModule().reference(case, device)
    assert set(got) == set(want)
    for key in want:
        assert close(got[key], want[key], *tolerance(case.dtype, device)), key


@pytest.mark.parametrize("case", s10_6.TRANSFORMER_CASES, ids=str)
def test_functional_transformer_matches_torch(case):
    """Does the functional model the diagnoses come from agree with nn.TransformerEncoder/Decoder?"""
    device = grading_device()
    got = s10_6._functional_transformer_outputs(case, device)
    want = s10_6.TransformerModel().reference(case, device)
    assert list(got)[:2] == ["memory", "logits"]
    for key in want:
        assert close(got[key], want[key], *tolerance(case.dtype, device)), key


@pytest.mark.parametrize("exercise", s10_6.EXERCISES, ids=lambda e: e.name)
def test_every_mistake_shows_in_some_case(exercise):
    """Is every named mistake different from the right answer in at least one case (else it
    could never be diagnosed)?"""
    device = grading_device()
    for name, mistake in exercise.mistakes.items():
        differs = False
        for case in exercise.cases():
            want = exercise.reference(case, device)
            got = mistake.run(case, device)
            key = next(iter(want))
            differs |= not close(got[key], want[key], 1e-6, 1e-7)
        assert differs, f"{exercise.name}: mistake {name} never differs from the reference"


# ---------------------------------------------------------------- causal_mask


def causal_arange(n, device=None):
    """A right answer: compare positions."""
    i = torch.arange(n, device=device)
    return i[:, None] >= i[None, :]


def causal_not_triu(n, device=None):
    """A right answer: the complement of the strict upper triangle."""
    return ~torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def causal_float_compare(n, device=None):
    """A right answer: a float lower triangle, compared with 1."""
    return torch.tril(torch.ones(n, n, device=device)) == 1


@pytest.mark.parametrize("impl", [causal_arange, causal_not_triu, causal_float_compare])
def test_causal_variants_pass(impl):
    """Are comparisons of positions, ~triu(1) and a compared float triangle accepted?"""
    assert_passes(s10_6.check_causal_mask, impl)


CAUSAL_BUGS = {
    "no diagonal": (lambda n, device=None: torch.ones(n, n, device=device).tril(-1).bool(),
                    r"without its diagonal"),
    "inverted": (lambda n, device=None: torch.ones(n, n, device=device).triu(1).bool(), r"inverted"),
    "upper": (lambda n, device=None: torch.ones(n, n, device=device).triu().bool(), r"upper-triangular"),
    "float mask": (lambda n, device=None: torch.ones(n, n, device=device).tril(), r"bool tensor"),
    "ignores device": (lambda n, device=None: torch.ones(n, n, dtype=torch.bool).tril(), r"device"),
    "batch axis": (lambda n, device=None: torch.ones(1, n, n, dtype=torch.bool, device=device).tril(),
                   r"shape \(5, 5\)|shape \(1, 1\)"),
}


@pytest.mark.parametrize("bug", CAUSAL_BUGS)
def test_causal_bugs_fail(bug):
    """Is each wrong causal mask rejected, with the diagnosis named?"""
    impl, match = CAUSAL_BUGS[bug]
    assert_fails(s10_6.check_causal_mask, impl, match)


# ---------------------------------------------------------------- padding_mask


def padding_unsqueeze(tokens, pad_id):
    """A right answer: ne, then two unsqueezes."""
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)


def padding_view(tokens, pad_id):
    """A right answer: a view with the shape written out."""
    B, n = tokens.shape
    return (tokens != pad_id).view(B, 1, 1, n)


@pytest.mark.parametrize("impl", [padding_unsqueeze, padding_view])
def test_padding_variants_pass(impl):
    """Are unsqueeze and view versions accepted?"""
    assert_passes(s10_6.check_padding_mask, impl)


def padding_from_lengths(tokens, pad_id):
    """Wrong for left padding: assumes the padding is at the end."""
    lengths = (tokens != pad_id).sum(dim=1)
    keep = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths[:, None]
    return keep[:, None, None, :]


PADDING_BUGS = {
    "inverted": (lambda t, p: (t == p)[:, None, None, :], r"inverted"),
    "pad 0": (lambda t, p: (t != 0)[:, None, None, :], r"ignores pad_id"),
    "(B, n)": (lambda t, p: t != p, r"\(B, 1, 1, n\).*got|returned \(2, 5\)"),
    "(B, 1, n)": (lambda t, p: (t != p)[:, None, :], r"returned \(2, 1, 5\)"),
    "queries": (lambda t, p: (t != p)[:, None, :, None], r"hides \*keys\*"),
    "float": (lambda t, p: (t != p).float()[:, None, None, :], r"bool tensor"),
    "lengths": (padding_from_lengths, r"padding at the start"),
}


@pytest.mark.parametrize("bug", PADDING_BUGS)
def test_padding_bugs_fail(bug):
    """Is each wrong padding mask rejected, with the diagnosis named?"""
    impl, match = PADDING_BUGS[bug]
    assert_fails(s10_6.check_padding_mask, impl, match)


# ---------------------------------------------------------------- DecoderBlock


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


@pytest.mark.parametrize("impl", ["DecoderBlock", DecoderBase, DecoderFunctionalDropout], ids=name_of)
def test_decoder_variants_pass(impl, solution):
    """Are the solution, a loop over sublayers and a version with F.dropout accepted?"""
    assert_passes(s10_6.check_DecoderBlock, implementation(impl, solution))


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


DECODER_BUGS = {
    "cross from x": (DecoderCrossFromX, r"keys and values come from x"),
    "queries from memory": (DecoderQueriesFromMemory,
                            r"must match the size.*queries of both attentions come from x"),
    "norm3 unused": (DecoderNoNorm3, r"missing third LayerNorm"),
    "no norm3": (DecoderWithoutNorm3, r"wrong parameters \(missing norm3\.weight"),
    "norm2 twice": (DecoderNorm2Twice, r"norm2 used for the feed-forward"),
    "no tgt_mask": (DecoderNoTgtMask, r"self-attention without tgt_mask"),
    "no memory_mask": (DecoderNoMemoryMask, r"cross-attention without memory_mask"),
    "memory normed": (DecoderNormsMemory, r"normalises memory"),
    "no cross residual": (DecoderNoCrossResidual, r"without its residual"),
    "always post-norm": (DecoderAlwaysPost, r"post-norm although norm_first=True"),
    "always pre-norm": (DecoderAlwaysPre, r"pre-norm although norm_first=False"),
    "masks swapped": (DecoderMasksSwapped, r"raised RuntimeError|differs"),
    "nn.MultiheadAttention core": (DecoderTorchAttention, r"No credit.*multi_head_attention_forward"),
    "dropout in eval": (DecoderAlwaysDropout, r"dropout=0\.1 in eval"),
}


@pytest.mark.parametrize("bug", DECODER_BUGS)
def test_decoder_bugs_fail(bug):
    """Is each wrong decoder block rejected, with the diagnosis named?"""
    impl, match = DECODER_BUGS[bug]
    assert_fails(s10_6.check_DecoderBlock, impl, match)


# ---------------------------------------------------------------- Transformer


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


@pytest.mark.parametrize("impl", ["Transformer", TransformerBase, TransformerTargetPadding], ids=name_of)
def test_transformer_variants_pass(impl, solution):
    """Are the solution, an independent version (padding_idx embeddings) and one that also
    masks target padding accepted?"""
    assert_passes(s10_6.check_Transformer, implementation(impl, solution))


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


TRANSFORMER_BUGS = {
    "no causal mask": (TransformerNoCausal, r"decoder without the causal mask"),
    "causal mask inverted": (TransformerCausalInverted, r"shows each position the future"),
    "no padding": (TransformerNoPadding, r"ignores the source padding"),
    "no memory mask": (TransformerNoCrossPadding, r"without the source padding mask \(memory_mask\)"),
    "pad 0 in forward": (TransformerPadZero, r"forward should build padding_mask\(src, self\.pad_id\)"),
    "forward without mask": (TransformerForwardNoMask, r"model\(src, tgt\) differs"),
    "no final norm (pre-norm)": (TransformerNoFinalNorm, r"without their final LayerNorms"),
    "final norm in post-norm": (TransformerFinalNormAlways, r"unexpected decoder_norm\.bias.*nn\.Identity"),
    "scaled embeddings": (TransformerScaled, r"sqrt\(d_model\)"),
    "no target positions": (TransformerNoTargetPositions, r"target embeddings without the positional"),
    "shared embedding": (TransformerSharedEmbedding, r"wrong parameters \(missing tgt_embed\.weight"),
}


@pytest.mark.parametrize("bug", TRANSFORMER_BUGS)
def test_transformer_bugs_fail(bug):
    """Is each wrong Transformer rejected, with the diagnosis named?"""
    impl, match = TRANSFORMER_BUGS[bug]
    assert_fails(s10_6.check_Transformer, impl, match)


def test_property_checks_catch_what_they_claim():
    """Do the causality and padding properties themselves reject a leaking model?"""
    exercise, case, device = s10_6.TransformerModel(), s10_6.TRANSFORMER_CASES[1], grading_device()
    src, tgt, _ = s10_6.transformer_inputs(case, device)
    for impl, check, match in ((TransformerNoCausal, exercise._check_causal, r"sees the future"),
                               (TransformerNoPadding, exercise._check_padding, r"padding leaks")):
        torch.manual_seed(0)
        model = s10_6._build_transformer(impl, case, "Transformer", device)
        with pytest.raises(AssertionError, match=match):
            check(model, src, tgt, case)


# ---------------------------------------------------------------- greedy_decode

BOS_, EOS_ = 1, 2


@torch.no_grad()
def greedy_one_by_one(model, src, bos_id, eos_id, max_len):
    """A right answer: one sentence at a time with model(src, ys); rows padded with eos_id."""
    rows = []
    for b in range(src.shape[0]):
        ys = torch.tensor([[bos_id]], device=src.device)
        for _ in range(max_len - 1):
            word = model(src[b:b + 1], ys)[0, -1].argmax()
            ys = torch.cat([ys, word.view(1, 1)], dim=1)
            if word.item() == eos_id:
                break
        rows.append(ys[0])
    n = max(len(r) for r in rows)
    return torch.stack([F.pad(r, (0, n - len(r)), value=eos_id) for r in rows])


@torch.no_grad()
def greedy_pad_after_eos(model, src, bos_id, eos_id, max_len):
    """A right answer: a for loop with break; finished rows continue with pad_id."""
    mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, mask)
    ys = src.new_full((src.shape[0], 1), bos_id)
    done = torch.zeros_like(ys[:, 0], dtype=torch.bool)
    for _ in range(max_len - 1):
        word = model.decode(ys, memory, mask)[:, -1, :].argmax(-1)
        word[done] = model.pad_id
        ys = torch.cat([ys, word.unsqueeze(1)], 1)
        done = done | (word == eos_id)
        if bool(done.all()):
            break
    return ys


@pytest.mark.parametrize("impl", ["greedy_decode", greedy_one_by_one, greedy_pad_after_eos], ids=name_of)
def test_greedy_variants_pass(impl, solution):
    """Are the solution, sentence-by-sentence decoding with model(src, ys) and a for loop
    padding finished sentences accepted?"""
    assert_passes(s10_6.check_greedy_decode, implementation(impl, solution))


def make_greedy(*, stop="all", length="total", feed="output", position=-1, bos="arg",
                dtype=torch.long):
    """greedy_decode with one learner-like mistake switched on."""

    @torch.no_grad()
    def greedy(model, src, bos_id, eos_id, max_len):
        mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, mask)
        start = bos_id if bos == "arg" else BOS_
        ys = torch.full((src.shape[0], 1), start, device=src.device).to(dtype)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        steps = max_len - 1 if length == "total" else max_len
        for _ in range(steps):
            inputs = ys if feed == "output" else ys[:, :1]
            word = model.decode(inputs.long(), memory, mask)[:, position].argmax(-1)
            ys = torch.cat([ys, word[:, None].to(dtype)], dim=1)
            done |= word == eos_id
            if stop == "all" and done.all() or stop == "first" and done.any():
                break
        return ys[:, 1:] if bos == "drop" else ys

    return greedy


GREEDY_BUGS = {
    "never stops": (make_greedy(stop="never"), r"did not stop"),
    "stops at the first eos": (make_greedy(stop="first"), r"stopped after 4 tokens.*until all sentences"),
    "max_len new tokens": (make_greedy(length="new"), r"max_len counts every token"),
    "no bos in the output": (make_greedy(bos="drop"), r"start with bos_id"),
    "bos hard-coded": (make_greedy(bos="fixed"), r"start with bos_id=7"),
    "never feeds back": (make_greedy(feed="bos"), r"same token"),
    "first position": (make_greedy(position=0), r"same token"),
    "float ids": (make_greedy(dtype=torch.float32), r"LongTensor"),
}


@pytest.mark.parametrize("bug", GREEDY_BUGS)
def test_greedy_bugs_fail(bug):
    """Is each wrong decoding loop rejected, with the diagnosis named?"""
    impl, match = GREEDY_BUGS[bug]
    assert_fails(s10_6.check_greedy_decode, impl, match)


def test_greedy_wrong_prefix_is_explained():
    """Does a loop that feeds the wrong tokens back get told what the decoder input must be?"""
    @torch.no_grad()
    def feeds_bos_twice(model, src, bos_id, eos_id, max_len):
        memory = model.encode(src, None)
        ys = torch.full((src.shape[0], 1), bos_id, device=src.device)
        while ys.shape[1] < max_len:
            inputs = torch.cat([ys[:, :1], ys], dim=1)  # <bos> <bos> w1 ...: not the output so far
            word = model.decode(inputs, memory, None)[:, -1].argmax(-1)
            ys = torch.cat([ys, word[:, None]], dim=1)
            if (word == eos_id).all():
                break
        return ys

    assert_fails(s10_6.check_greedy_decode, feeds_bos_twice, r"does not follow from the tokens")


# ---------------------------------------------------------------- greedy_decode_cached


@pytest.mark.parametrize("case", s10_6.TRANSFORMER_CASES, ids=str)
def test_notebook_transformer_matches_the_functional_model(case):
    """Does the check's own model (the notebook's layout) compute what the functional model does?"""
    device = torch.device("cpu")
    src, tgt, p = s10_6.transformer_inputs(case, device)
    model = s10_6.NotebookTransformer(case).to(device, case.dtype).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(p[name])
        model.pos_encoding.pe.copy_(s10_6.sinusoidal_table(s10_6.DECODE_MAX_LEN, 12, case.dtype, device))
        memory, logits = s10_6.functional_transformer(src, tgt, p, case)
        assert close(model(src, tgt), logits, *tolerance(case.dtype, device))


@pytest.mark.parametrize("case", s10_6.CACHED_CASES, ids=str)
def test_cached_cases_are_decisive(case):
    """Is every greedy choice of a case clear (no near-ties that rounding could flip), does the
    check's cached decoder agree with plain greedy decoding, and do the sentences of a batch end
    at different steps?"""
    p, device = case.params, torch.device("cpu")
    model, src = s10_6.decoding_model(case, device), s10_6.decoding_source(case, device)
    ys, margin = s10_6.reference_greedy(model, src, p["bos"], p["eos"], p["max_len"])
    assert margin > (1e-2 if case.dtype == torch.float32 else 1e-3)
    assert torch.equal(s10_6.cached_greedy(model, src, p["bos"], p["eos"], p["max_len"]), ys)
    ends = {next((i for i, w in enumerate(row) if i and w == p["eos"]), None) for row in ys.tolist()}
    assert len(ys) == 1 or "max_len" in case.name or len(ends) >= min(len(ys), 3)


def test_cached_cases_cover_padding_pre_norm_and_float32():
    """Do the cases include padded batches, pre-norm, float32 and confident models?"""
    cases = s10_6.CACHED_CASES
    assert any(any(c.params["short"]) for c in cases)
    assert any(c.params.get("norm_first") for c in cases)
    assert any(c.dtype == torch.float32 for c in cases)
    assert any(c.params.get("confident") for c in cases) and any(not c.params.get("confident") for c in cases)


def _split(x, h):
    B, n, d = x.shape
    return x.view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d // h)


@torch.no_grad()
def cached_lists_einsum(model, src, bos_id, eos_id, max_len):
    """A right answer: caches as Python lists concatenated each step, einsum attention,
    F.softmax, positions from pe[t:t + 1], a for loop."""
    mask = (src != model.pad_id)[:, None, None, :]
    memory = model.encode(src, mask)
    blocks = list(model.decoder_layers)
    cross = [(_split(b.cross_attn.w_k(memory), b.cross_attn.num_heads),
              _split(b.cross_attn.w_v(memory), b.cross_attn.num_heads)) for b in blocks]
    keys, values = [[] for _ in blocks], [[] for _ in blocks]
    ys = src.new_full((src.shape[0], 1), bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)

    def attend(attn, y, k, v, m=None):
        q = _split(attn.w_q(y), attn.num_heads)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        if m is not None:
            s = s.masked_fill(~m, float("-inf"))
        out = torch.einsum("bhqk,bhkd->bqhd", F.softmax(s, dim=-1), v).flatten(2)
        return attn.w_o(out)

    for t in range(max_len - 1):
        x = model.tgt_embed(ys[:, t:t + 1]) + model.pos_encoding.pe[t:t + 1]
        for i, b in enumerate(blocks):
            def self_attn(y, i=i, b=b):
                keys[i].append(_split(b.self_attn.w_k(y), b.self_attn.num_heads))
                values[i].append(_split(b.self_attn.w_v(y), b.self_attn.num_heads))
                return attend(b.self_attn, y, torch.cat(keys[i], 2), torch.cat(values[i], 2))

            def cross_attn(y, i=i, b=b):
                return attend(b.cross_attn, y, *cross[i], mask)

            for sub, norm in ((self_attn, b.norm1), (cross_attn, b.norm2), (b.ffn, b.norm3)):
                x = x + sub(norm(x)) if b.norm_first else norm(x + sub(x))
        word = model.out(model.decoder_norm(x)).argmax(-1)  # (B, 1)
        word[done] = eos_id
        ys = torch.cat([ys, word], 1)
        done |= word[:, 0] == eos_id
        if done.all():
            break
    return ys


@torch.no_grad()
def cached_drops_finished(model, src, bos_id, eos_id, max_len):
    """A right answer: F.scaled_dot_product_attention, and finished sentences leave the batch
    (their rows are filled with eos_id)."""
    mask = (src != model.pad_id)[:, None, None, :]
    memory = model.encode(src, mask)
    B = src.shape[0]
    out = torch.full((B, max_len), eos_id, dtype=torch.long, device=src.device)
    out[:, 0] = bos_id
    rows = torch.arange(B, device=src.device)  # the sentences still being decoded
    cache = []
    for b in model.decoder_layers:
        h = b.cross_attn.num_heads
        cache.append({"ck": _split(b.cross_attn.w_k(memory), h), "cv": _split(b.cross_attn.w_v(memory), h),
                      "k": None, "v": None})
    length = 1
    for t in range(max_len - 1):
        x = model.tgt_embed(out[rows, t:t + 1]) + model.pos_encoding.pe[t]
        for b, c in zip(model.decoder_layers, cache):
            h = b.self_attn.num_heads

            def sa(y, b=b, c=c, h=h):
                k, v = _split(b.self_attn.w_k(y), h), _split(b.self_attn.w_v(y), h)
                c["k"] = k if c["k"] is None else torch.cat([c["k"], k], 2)
                c["v"] = v if c["v"] is None else torch.cat([c["v"], v], 2)
                q = _split(b.self_attn.w_q(y), h)
                o = F.scaled_dot_product_attention(q, c["k"], c["v"])
                return b.self_attn.w_o(o.transpose(1, 2).flatten(2))

            def ca(y, b=b, c=c, h=h, rows=rows):
                q = _split(b.cross_attn.w_q(y), h)
                o = F.scaled_dot_product_attention(q, c["ck"], c["cv"], attn_mask=mask[rows])
                return b.cross_attn.w_o(o.transpose(1, 2).flatten(2))

            for sub, norm in ((sa, b.norm1), (ca, b.norm2), (b.ffn, b.norm3)):
                x = x + sub(norm(x)) if b.norm_first else norm(x + sub(x))
        word = model.out(model.decoder_norm(x))[:, -1].argmax(-1)
        out[rows, t + 1] = word
        length = t + 2
        keep = word != eos_id
        rows = rows[keep]
        for c in cache:
            c["k"], c["v"], c["ck"], c["cv"] = c["k"][keep], c["v"][keep], c["ck"][keep], c["cv"][keep]
        if len(rows) == 0:
            break
    return out[:, :length]


@pytest.mark.parametrize("impl", ["greedy_decode_cached", cached_lists_einsum, cached_drops_finished],
                         ids=name_of)
def test_cached_variants_pass(impl, solution):
    """Are the solution, list caches with einsum, and a decoder that drops finished sentences
    (with F.scaled_dot_product_attention) accepted?"""
    assert_passes(s10_6.check_greedy_decode_cached, implementation(impl, solution))


def make_cached(solution, **switch):
    """The check's own cached decoder with one mistake switched on, as a learner's function."""
    def cached(model, src, bos_id, eos_id, max_len):
        return s10_6.cached_greedy(model, src, bos_id, eos_id, max_len, **switch)
    return cached


def uncached(model, src, bos_id, eos_id, max_len):
    """greedy_decode itself: right ids, no cache."""
    return s10_6.reference_greedy(model, src, bos_id, eos_id, max_len)[0]


@torch.no_grad()
def cross_every_step(model, src, bos_id, eos_id, max_len):
    """Right ids and a self-attention cache, but block.cross_attn(y, memory, memory, mask) at every step."""
    mask = (src != model.pad_id)[:, None, None, :]
    memory = model.encode(src, mask)
    caches = [{"k": [], "v": []} for _ in model.decoder_layers]
    ys = src.new_full((src.shape[0], 1), bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    while ys.shape[1] < max_len and not done.all():
        t = ys.shape[1] - 1
        x = model.tgt_embed(ys[:, -1:]) + model.pos_encoding.pe[t]
        for b, c in zip(model.decoder_layers, caches):
            def sa(y, b=b, c=c):
                h = b.self_attn.num_heads
                c["k"].append(_split(b.self_attn.w_k(y), h))
                c["v"].append(_split(b.self_attn.w_v(y), h))
                return s10_6._attend(b.self_attn, y, torch.cat(c["k"], 2), torch.cat(c["v"], 2), None)

            def ca(y, b=b):
                return b.cross_attn(y, memory, memory, mask)[0]

            for sub, norm in ((sa, b.norm1), (ca, b.norm2), (b.ffn, b.norm3)):
                x = x + sub(norm(x)) if b.norm_first else norm(x + sub(x))
        word = model.out(model.decoder_norm(x))[:, -1].argmax(-1).masked_fill(done, eos_id)
        ys = torch.cat([ys, word[:, None]], 1)
        done |= word == eos_id
    return ys


def encoder_every_step(model, src, bos_id, eos_id, max_len):
    """Right ids, but the encoder runs again before every step."""
    for _ in range(2, max_len):
        model.encode(src, (src != model.pad_id)[:, None, None, :])
    return s10_6.cached_greedy(model, src, bos_id, eos_id, max_len)


def through_weights(model, src, bos_id, eos_id, max_len):
    """Right ids from the layers' weights (F.linear), never calling the decoder's modules."""
    with torch.no_grad():
        mask = (src != model.pad_id)[:, None, None, :]
        p = dict(model.named_parameters())
        memory = model.encode(src, mask)
        ys = src.new_full((src.shape[0], 1), bos_id)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        while ys.shape[1] < max_len and not done.all():
            n = ys.shape[1]
            y = model.tgt_embed(ys) + model.pos_encoding.pe[:n]
            causal = torch.ones(n, n, dtype=torch.bool, device=src.device).tril()
            for i, b in enumerate(model.decoder_layers):
                activation = "gelu" if isinstance(b.ffn.activation, nn.GELU) else "relu"
                y = s10_6.functional_decoder_block(y, memory, p, f"decoder_layers.{i}.",
                                                   b.self_attn.num_heads, causal, mask, activation,
                                                   b.norm_first)
            word = model.out(model.decoder_norm(y))[:, -1].argmax(-1).masked_fill(done, eos_id)
            ys = torch.cat([ys, word[:, None]], 1)
            done |= word == eos_id
        return ys


def as_method(model, src, bos_id, eos_id, max_len):
    """Calls a helper the learner added to their own DecoderBlock class."""
    return model.decoder_layers[0].step_cached(src)


def cached_fixed_device(model, src, bos_id, eos_id, max_len):
    ys = s10_6.cached_greedy(model, src, bos_id, eos_id, max_len)
    return ys + torch.zeros(ys.shape, dtype=torch.long)  # created on the CPU, whatever src's device


def cached_float_ids(model, src, bos_id, eos_id, max_len):
    return s10_6.cached_greedy(model, src, bos_id, eos_id, max_len).float()


CACHED_BUGS = {
    "no cache at all": (lambda s: uncached, r"processed \d+ positions.*newest position"),
    "cross-attention keys every step": (lambda s: cross_every_step, r"cross-attention keys and values"),
    "encoder every step": (lambda s: encoder_every_step, r"ran the encoder \d+ times"),
    "through the weights": (lambda s: through_weights, r"never called the decoder blocks' layers"),
    "position 0 for every token": (lambda s: make_cached(s, position="zero"), r"embedded at position 0"),
    "position one too far": (lambda s: make_cached(s, position="next"), r"one position too far"),
    "no self-attention cache": (lambda s: make_cached(s, self_cache=False), r"sees only the newest"),
    "one cache for all blocks": (lambda s: make_cached(s, shared_cache=True), r"one cache shared"),
    "no source mask": (lambda s: make_cached(s, memory_mask=False), r"without the source padding"),
    "no decoder_norm": (lambda s: make_cached(s, decoder_norm=False), r"decoder_norm skipped"),
    "always post-norm": (lambda s: make_cached(s, norm_first=False), r"post-norm sublayers"),
    "helper as a method": (lambda s: as_method, r"keep your helpers"),
    "tensor on a fixed device": (lambda s: cached_fixed_device, r"without a device"),
    "float ids": (lambda s: cached_float_ids, r"dtype=torch\.long"),
}


@pytest.mark.parametrize("bug", CACHED_BUGS)
def test_cached_bugs_fail(bug, solution):
    """Is each wrong or uncached decoder rejected, with the diagnosis named?"""
    make, match = CACHED_BUGS[bug]
    assert_fails(s10_6.check_greedy_decode_cached, make(solution), match)


def test_cached_visible_test_accepts_right_answers(solution):
    for impl in ("greedy_decode_cached", cached_lists_einsum, cached_drops_finished):
        run_visible_test(ASSIGNMENT, "greedy_decode_cached", implementation(impl, solution))


VISIBLE_CACHED = {  # bug: what the visible test says (the stand-in model shows each of them)
    "no cache at all": r"processed \d+ positions.*newest position",
    "cross-attention keys every step": r"cross-attention keys and values \d+ times",
    "encoder every step": r"ran the encoder \d+ times",
    "through the weights": r"never called the decoder blocks' layers",
    "position 0 for every token": r"embedded at position 0",
    "position one too far": r"one position too far",
    "no self-attention cache": r"sees only the newest position",
    "one cache for all blocks": r"one cache per block",
    "no source mask": r"without the source padding mask",
    "no decoder_norm": r"decoder_norm skipped",
    "always post-norm": r"post-norm sublayers",
    "helper as a method": r"not as new methods of your classes",
    "float ids": r"dtype=torch\.long",
}


def test_every_cached_bug_has_a_visible_expectation():
    """Only the fixed-device bug (seen on a GPU, at grading) is left to the hidden check."""
    assert set(CACHED_BUGS) - set(VISIBLE_CACHED) == {"tensor on a fixed device"}


@pytest.mark.parametrize("bug", VISIBLE_CACHED)
def test_cached_visible_test_names_the_mistake(bug, solution):
    """Does the visible test reject each planted bug with the hidden check's diagnosis or a pointer?"""
    with pytest.raises(AssertionError, match=VISIBLE_CACHED[bug]):
        run_visible_test(ASSIGNMENT, "greedy_decode_cached", CACHED_BUGS[bug][0](solution))


# ---------------------------------------------------------------- beam_search


def test_exhaustive_case_is_exhaustive():
    """Is the wide beam as wide as every hypothesis, so that it must find the exhaustive optimum,
    and is greedy wrong there (the case would prove nothing otherwise)?"""
    case = next(c for c in s10_6.BEAM_CASES if c.params.get("exhaustive"))
    p = case.params
    model, src = s10_6.beam_model(case, torch.device("cpu"))
    assert p["beam_size"] >= p["vocab"] ** (p["max_len"] - 2)
    best = s10_6.exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
    assert s10_6.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"]) == best
    assert s10_6.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], 1)[0] != best[0]


def test_scripted_cases_show_what_their_names_say():
    """Is greedy wrong in the first case, and does the refill case need the refill?"""
    device = torch.device("cpu")
    greedy_case, refill_case = s10_6.BEAM_CASES[0], s10_6.BEAM_CASES[2]
    for case, switch in ((greedy_case, {"width": 1}), (refill_case, {"no_refill": True})):
        p = case.params
        model, src = s10_6.beam_model(case, device)
        right = s10_6.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"])
        assert right == s10_6.exhaustive_search(model, p["bos"], p["eos"], p["max_len"])
        wrong = s10_6.reference_beam(model, src, p["bos"], p["eos"], p["max_len"], p["beam_size"], **switch)
        assert wrong != right


def beam_lists(model, src, bos_id, eos_id, max_len, beam_size=4):
    """A right answer: Python lists of (ids, score), one model(src, ys) call per hypothesis, sorted()."""
    with torch.no_grad():
        alive, finished = [([bos_id], 0.0)], []
        while alive and len(alive[0][0]) < max_len:
            candidates = []
            for ids, score in alive:
                logits = model(src, torch.tensor([ids], device=src.device))[0, -1]
                logp = torch.log_softmax(logits.double(), -1)
                candidates += [(ids + [w], score + logp[w].item()) for w in range(len(logp))]
            candidates.sort(key=lambda c: -c[1])
            kept = candidates[:beam_size]
            finished += [c for c in kept if c[0][-1] == eos_id]
            alive = [c for c in kept if c[0][-1] != eos_id]
        best = max(finished + alive, key=lambda c: c[1])
        return torch.tensor([best[0]], device=src.device), best[1]


def beam_no_early_stop(model, src, bos_id, eos_id, max_len, beam_size=4):
    """A right answer: the solution's search without the early stop, score as a 0-d tensor."""
    with torch.no_grad():
        mask = (src != model.pad_id)[:, None, None, :]
        memory = model.encode(src, mask)
        alive = src.new_full((1, 1), bos_id)
        scores = torch.zeros(1, dtype=torch.float64, device=src.device)
        done_ids, done_scores = [], []
        while len(alive) and alive.shape[1] < max_len:
            k = len(alive)
            logits = model.decode(alive, memory.expand(k, -1, -1), mask.expand(k, -1, -1, -1))[:, -1]
            total = (scores[:, None] + logits.double().log_softmax(-1)).flatten()
            best, index = total.topk(min(beam_size, len(total)))
            V = logits.shape[-1]
            ext = torch.cat([alive[index // V], (index % V)[:, None]], 1)
            end = ext[:, -1] == eos_id
            done_ids += list(ext[end])
            done_scores += list(best[end])
            alive, scores = ext[~end], best[~end]
        pool = list(zip(done_scores, done_ids)) + list(zip(scores, alive))
        score, ids = max(pool, key=lambda c: float(c[0]))
        return ids[None], score


@pytest.mark.parametrize("impl", ["beam_search", beam_lists, beam_no_early_stop], ids=name_of)
def test_beam_variants_pass(impl, solution):
    """Are the solution, a list-based search calling model(src, ys) per hypothesis, and a search
    without the early stop returning a tensor score accepted?"""
    assert_passes(s10_6.check_beam_search, implementation(impl, solution))


def make_beam(**switch):
    """The check's reference search with one mistake switched on, as a learner's function."""
    def search(model, src, bos_id, eos_id, max_len, beam_size=4):
        ids, score = s10_6.reference_beam(model, src, bos_id, eos_id, max_len, beam_size, **switch)
        return torch.tensor([ids], device=src.device), score
    return search


def beam_probability(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return ids, math.exp(score)


def beam_flat_ids(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return ids[0], score


def beam_past_eos(model, src, bos_id, eos_id, max_len, beam_size=4):
    ids, score = make_beam()(model, src, bos_id, eos_id, max_len, beam_size)
    return torch.cat([ids, ids.new_full((1, 1), eos_id)], 1)[:, :max_len], score


BEAM_BUGS = {
    "beam_size ignored": (make_beam(width=1), r"beam_size ignored"),
    "raw logits": (make_beam(raw_logits=True), r"raw logits"),
    "finished hypotheses take slots": (make_beam(finished_compete=True), r"taking slots"),
    "the beam shrinks": (make_beam(no_refill=True), r"shrinks by one"),
    "finished hypotheses dropped": (make_beam(drop_finished=True), r"thrown away"),
    "length penalty": (make_beam(length_norm=True), r"mean log-probability"),
    "max_len without bos": (make_beam(new_tokens=True), r"max_len counts every token"),
    "score as a probability": (beam_probability, r"looks like a probability"),
    "1-D ids": (beam_flat_ids, r"shape \(1, n\)"),
    "goes on after eos": (beam_past_eos, r"goes on after eos_id"),
}


@pytest.mark.parametrize("bug", BEAM_BUGS)
def test_beam_bugs_fail(bug):
    """Is each wrong beam search rejected, with the diagnosis named?"""
    impl, match = BEAM_BUGS[bug]
    assert_fails(s10_6.check_beam_search, impl, match)


def test_beam_visible_test_accepts_right_answers(solution):
    for impl in ("beam_search", beam_lists, beam_no_early_stop):
        run_visible_test(ASSIGNMENT, "beam_search", implementation(impl, solution))


VISIBLE_BEAM = {  # bug: what the visible test says (on its scripted tables)
    "beam_size ignored": r"beam_size ignored",
    "raw logits": r"raw logits",
    "finished hypotheses take slots": r"taking slots",
    "the beam shrinks": r"shrinks by one",
    "finished hypotheses dropped": r"thrown away",
    "length penalty": r"mean log-probability",
    "max_len without bos": r"max_len counts every token",
    "score as a probability": r"looks like a probability",
    "1-D ids": r"shape \(1, n\)",
    "goes on after eos": r"goes on after eos_id",
}


def test_every_beam_bug_has_a_visible_expectation():
    assert set(VISIBLE_BEAM) == set(BEAM_BUGS)


@pytest.mark.parametrize("bug", VISIBLE_BEAM)
def test_beam_visible_test_names_the_mistake(bug):
    with pytest.raises(AssertionError, match=VISIBLE_BEAM[bug]):
        run_visible_test(ASSIGNMENT, "beam_search", BEAM_BUGS[bug][0])
