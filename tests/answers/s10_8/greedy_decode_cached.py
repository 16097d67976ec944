"""greedy_decode_cached: right answers written differently, and planted bugs (several built on the
hidden check's own cached decoder with one mistake switched on)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_8.greedy_decode_cached import (
    AFTER_EOS,
    ALWAYS_POST,
    NO_DECODER_NORM,
    NO_MEMORY_MASK,
    NO_SELF_CACHE,
    POSITION_NEXT,
    POSITION_ZERO,
)
from grader.checks.s10_8.greedy_decode_cached import attend, cached_greedy
from tests.answers import bug, right

EXERCISE = "greedy_decode_cached"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = ("a decoding loop on a stand-in model: the reference is the contract's ids, checked step by "
                "step")


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


def make_cached(**switch):
    """The check's own cached decoder with one mistake switched on, as a learner's function."""
    def cached(model, src, bos_id, eos_id, max_len):
        return cached_greedy(model, src, bos_id, eos_id, max_len, **switch)
    return cached


@torch.no_grad()
def reference_greedy(model, src, bos_id, eos_id, max_len):
    """greedy_decode as 10.6's solution writes it (the decoder on the whole output at every step):
    (ids (B, n), the smallest gap between the two largest logits of a step, over unfinished rows)."""
    src_mask = (src != model.pad_id)[:, None, None, :]  # (B, 1, 1, n_src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    margin = math.inf
    while ys.shape[1] < max_len and not finished.all():
        logits = model.decode(ys, memory, src_mask)[:, -1]  # (B, vocab)
        top = logits.topk(2, dim=-1).values
        margin = min(margin, float((top[:, 0] - top[:, 1])[~finished].min()))
        word = logits.argmax(dim=-1).masked_fill(finished, eos_id)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos_id
    return ys, margin


def uncached(model, src, bos_id, eos_id, max_len):
    """greedy_decode itself: right ids, no cache."""
    return reference_greedy(model, src, bos_id, eos_id, max_len)[0]


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
                return attend(b.self_attn, y, torch.cat(c["k"], 2), torch.cat(c["v"], 2), None)

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
    return cached_greedy(model, src, bos_id, eos_id, max_len)


def _attend(query, key_value, p, prefix, h, mask):
    """Multi-head attention from primitives with the notebook's parameter names."""
    B, n_q, d = query.shape

    def heads(x, w):  # (B, n, d) -> (B, h, n, d // h)
        projected = F.linear(x, p[f"{prefix}{w}.weight"], p[f"{prefix}{w}.bias"])
        return projected.view(B, -1, h, d // h).transpose(1, 2)

    q, k, v = heads(query, "w_q"), heads(key_value, "w_k"), heads(key_value, "w_v")
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d // h)).masked_fill(~mask, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, n_q, d)
    return F.linear(out, p[f"{prefix}w_o.weight"], p[f"{prefix}w_o.bias"])


def functional_decoder_block(x, memory, p, prefix, h, tgt_mask, memory_mask, activation, norm_first):
    """A DecoderBlock from primitives (F.linear, F.layer_norm) and the block's weights."""
    def norm(y, name):
        return F.layer_norm(y, y.shape[-1:], p[f"{prefix}{name}.weight"], p[f"{prefix}{name}.bias"])

    def ffn(y):
        hidden = F.linear(y, p[f"{prefix}ffn.linear1.weight"], p[f"{prefix}ffn.linear1.bias"])
        hidden = F.gelu(hidden) if activation == "gelu" else F.relu(hidden)
        return F.linear(hidden, p[f"{prefix}ffn.linear2.weight"], p[f"{prefix}ffn.linear2.bias"])

    sublayers = ((lambda y: _attend(y, y, p, f"{prefix}self_attn.", h, tgt_mask), "norm1"),
                 (lambda y: _attend(y, memory, p, f"{prefix}cross_attn.", h, memory_mask), "norm2"),
                 (ffn, "norm3"))
    for sublayer, name in sublayers:
        x = x + sublayer(norm(x, name)) if norm_first else norm(x + sublayer(x), name)
    return x


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
                y = functional_decoder_block(y, memory, p, f"decoder_layers.{i}.",
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
    ys = cached_greedy(model, src, bos_id, eos_id, max_len)
    return ys + torch.zeros(ys.shape, dtype=torch.long)  # created on the CPU, whatever src's device


def cached_float_ids(model, src, bos_id, eos_id, max_len):
    return cached_greedy(model, src, bos_id, eos_id, max_len).float()


def answers(solution):
    return [
        right("solution", solution["greedy_decode_cached"]),
        right("cached_lists_einsum", cached_lists_einsum),
        right("cached_drops_finished", cached_drops_finished),
        bug("no cache at all", uncached, hidden=r"processed \d+ positions.*newest position"),
        bug("cross-attention keys every step", cross_every_step,
            hidden=r"cross-attention keys and values \d+ times"),
        bug("encoder every step", encoder_every_step, hidden=r"ran the encoder \d+ times"),
        bug("through the weights", through_weights, hidden=r"never called the decoder blocks' layers"),
        bug("position 0 for every token", make_cached(position="zero"), hidden=r"embedded at position 0",
            mistake=POSITION_ZERO),
        bug("position one too far", make_cached(position="next"), hidden=r"one position too far",
            mistake=POSITION_NEXT),
        bug("no self-attention cache", make_cached(self_cache=False), hidden=r"sees only the newest",
            mistake=NO_SELF_CACHE),
        bug("one cache for all blocks", make_cached(shared_cache=True), hidden=r"one cache shared"),
        bug("no source mask", make_cached(memory_mask=False), hidden=r"without the source padding",
            mistake=NO_MEMORY_MASK),
        bug("no decoder_norm", make_cached(decoder_norm=False), hidden=r"decoder_norm skipped",
            mistake=NO_DECODER_NORM),
        bug("always post-norm", make_cached(norm_first=False),
            hidden=r"post-norm sublayers", mistake=ALWAYS_POST),
        bug("finished sentences go on generating", make_cached(eos_after_finish=False),
            hidden=r"after its eos_id", mistake=AFTER_EOS),
        bug("helper as a method", as_method, hidden=r"keep your helpers"),
        bug("tensor on a fixed device", cached_fixed_device, hidden=r"without a device"),
        bug("float ids", cached_float_ids, hidden=r"dtype=torch\.long"),
    ]
