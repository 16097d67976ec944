"""Hidden check of ``greedy_decode_cached`` (defined in its visible module): its kinds again on
other stand-ins, and grading's own diagnosis of one cache shared by all decoder blocks, which takes
a cached decoder (:func:`cached_greedy`) that only grading holds."""

from __future__ import annotations

import torch
from torch import nn

from course.visible.s10_6.greedy_decode import until_eos
from course.visible.s10_8.greedy_decode_cached import SHARED_CACHE, GreedyDecodeCached, cached_case
from grader.checks.exercise import GradedExercise, registered
from grader.checks.shared_references import attention_weights


def _split(linear: nn.Module, x: torch.Tensor, h: int) -> torch.Tensor:
    B, n, d = x.shape
    return linear(x).view(B, n, h, d // h).transpose(1, 2)  # (B, h, n, d // h)


def attend(attention: nn.Module, x, k, v, mask) -> torch.Tensor:
    """The queries of x (B, n, d) against given keys and values (B, h, n_k, d // h)."""
    q = _split(attention.w_q, x, attention.num_heads)
    out = attention_weights(q, k, mask) @ v  # (B, h, n, d // h)
    B, h, n, d_h = out.shape
    return attention.w_o(out.transpose(1, 2).reshape(B, n, h * d_h))


CACHE_SWITCHES = {
    "position": "newest",  # "zero": every new token at position 0; "next": one position too far
    "self_cache": True,  # False: the newest position attends to itself only
    "memory_mask": True,  # False: cross-attention ignores the source padding
    "decoder_norm": True,  # False: decoder_norm skipped before out
    "norm_first": None,  # False: post-norm whatever the block says
    "shared_cache": False,  # True: one cache for all decoder blocks
    "eos_after_finish": True,  # False: a finished sentence goes on with its greedy choices
}


def cached_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                  **switch) -> torch.Tensor:
    """Greedy decoding with cached keys and values on the notebook's layout; ``switch`` turns on
    one known mistake (:data:`CACHE_SWITCHES`)."""
    with torch.no_grad():
        return _cached_greedy(model, src, bos, eos, max_len, **switch)


def _cached_greedy(model: nn.Module, src: torch.Tensor, bos: int, eos: int, max_len: int,
                   **switch) -> torch.Tensor:
    s = {**CACHE_SWITCHES, **switch}
    src_mask = (src != model.pad_id)[:, None, None, :]  # (B, 1, 1, n_src)
    memory = model.encode(src, src_mask)
    blocks = list(model.decoder_layers)
    cross = [(_split(b.cross_attn.w_k, memory, b.cross_attn.num_heads),
              _split(b.cross_attn.w_v, memory, b.cross_attn.num_heads)) for b in blocks]
    shared: dict = {"k": [], "v": []}
    caches = [shared if s["shared_cache"] else {"k": [], "v": []} for _ in blocks]
    ys = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    while ys.shape[1] < max_len and not finished.all():
        t = ys.shape[1] - 1  # position of the newest token
        position = {"newest": t, "zero": 0, "next": t + 1}[s["position"]]
        x = model.tgt_embed(ys[:, -1:]) + model.pos_encoding.pe[position]  # (B, 1, d)
        for block, (cross_k, cross_v), cache in zip(blocks, cross, caches):
            h = block.self_attn.num_heads

            def self_attention(y, block=block, cache=cache, h=h):
                k, v = _split(block.self_attn.w_k, y, h), _split(block.self_attn.w_v, y, h)
                if s["self_cache"]:
                    cache["k"].append(k)
                    cache["v"].append(v)
                    k, v = torch.cat(cache["k"], dim=2), torch.cat(cache["v"], dim=2)
                return attend(block.self_attn, y, k, v, None)

            def cross_attention(y, block=block, k=cross_k, v=cross_v):
                return attend(block.cross_attn, y, k, v, src_mask if s["memory_mask"] else None)

            norm_first = block.norm_first if s["norm_first"] is None else s["norm_first"]
            for sublayer, norm in ((self_attention, block.norm1), (cross_attention, block.norm2),
                                   (block.ffn, block.norm3)):
                x = x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))
        y = model.decoder_norm(x) if s["decoder_norm"] else x
        word = model.out(y)[:, -1].argmax(dim=-1)  # (B,)
        if s["eos_after_finish"]:
            word = word.masked_fill(finished, eos)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos
    return ys


# B sentences (short[b] pads at the end of row b), n_src, bos, eos, max_len: eos ids chosen so that
# the sentences end at different steps (tests/test_checks_s10_8.py holds it).
CASES = [
    cached_case("post-norm, 1 + 1 blocks, one sentence", 801, (1, 1), [0], 5, 1, 6, 8),
    cached_case("post-norm, 2 + 2 blocks, 3 sentences with padding", 904, (2, 2), [0, 2, 1], 6, 1, 12, 10),
    cached_case("pre-norm, 2 + 2 blocks, 4 sentences with padding", 814, (2, 2), [1, 0, 3, 2], 6, 1, 4, 10,
                norm_first=True),
    cached_case("pre-norm, GELU, 1 + 2 blocks, max_len reached", 800, (1, 2), [0, 2], 5, 1, 8, 7,
                norm_first=True, activation="gelu"),
    cached_case("pad_id=3, bos_id=5, 2 + 1 blocks", 820, (2, 1), [2, 0, 1], 6, 5, 9, 9, pad=3),
    cached_case("float32, post-norm, 2 + 2 blocks", 902, (2, 2), [0, 1, 2], 6, 1, 6, 9, torch.float32),
]


@registered
class GradedGreedyDecodeCached(GreedyDecodeCached, GradedExercise):
    def cases(self):
        return CASES

    def diagnose(self, case, model, src, tokens, memory, src_mask):
        """The visible side's diagnoses, then one cache shared by all blocks."""
        mistake = super().diagnose(case, model, src, tokens, memory, src_mask)
        if mistake is None and len(model.decoder_layers) > 1:
            p = case.params
            shared = cached_greedy(model, src, p["bos"], p["eos"], p["max_len"], shared_cache=True)
            if torch.equal(until_eos(shared, p["eos"]), until_eos(tokens, p["eos"])):
                return SHARED_CACHE
        return mistake
