"""Hidden check of ``greedy_decode_cached``: the ids of greedy decoding without a cache on the
notebook's Transformer (built by the check, :mod:`.models`), the encoder run once, one new
position per step through the decoder layers, the cross-attention keys computed once."""

from __future__ import annotations

import torch
from torch import nn

from course.checking.standins import expect_token_ids
from course.visible.s10_6.greedy_decode import until_eos
from course.visible.s10_8.greedy_decode_cached import (
    ALWAYS_POST,
    NO_DECODER_NORM,
    NO_MEMORY_MASK,
    NO_SELF_CACHE,
    POSITION_NEXT,
    POSITION_ZERO,
    SHARED_CACHE,
    GreedyDecodeCached,
    cached_case,
    with_how,
    wrong_counts,
    wrong_length,
)
from grader.checks.exercise import Exercise, registered
from grader.checks.guarded_calls import Case, CheckFailure, Outputs
from grader.checks.s10_8.models import decoding_model, decoding_source, reference_greedy, source_mask
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
    src_mask = source_mask(src, model.pad_id)
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
        word = model.out(y)[:, -1].argmax(dim=-1).masked_fill(finished, eos)  # (B,)
        ys = torch.cat([ys, word[:, None]], dim=1)
        finished |= word == eos
    return ys


class LayerCounter:
    """Forward hooks on a model's layers: positions per call, cross-attention projections,
    encoder runs. One position of one sentence is one row of a layer's input."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.most_rows = 0  # the most rows one call of a decoder layer processed
        self.cross_rows: dict[str, int] = {}  # rows through each block's cross w_k and w_v
        self.encoder_calls: dict[int, int] = {}
        self.handles: list = []

    def __enter__(self) -> LayerCounter:
        for i, block in enumerate(self.model.decoder_layers):
            for name, module in block.named_modules():
                if name in ("cross_attn.w_k", "cross_attn.w_v"):
                    self._hook(module, self._cross(f"{i}.{name}"))
                elif isinstance(module, (nn.Linear, nn.LayerNorm)):
                    self._hook(module, self._rows)
        for i, block in enumerate(self.model.encoder_layers):
            self._hook(block, self._encoder(i))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()

    def _hook(self, module: nn.Module, fn) -> None:
        self.handles.append(module.register_forward_hook(fn))

    @staticmethod
    def _count(inputs) -> int:
        x = inputs[0]
        return x.numel() // x.shape[-1] if x.dim() else 1

    def _rows(self, module, inputs, output) -> None:
        self.most_rows = max(self.most_rows, self._count(inputs))

    def _cross(self, name: str):
        def hook(module, inputs, output):
            self.cross_rows[name] = self.cross_rows.get(name, 0) + self._count(inputs)
        return hook

    def _encoder(self, i: int):
        def hook(module, inputs, output):
            self.encoder_calls[i] = self.encoder_calls.get(i, 0) + 1
        return hook

    def outputs(self) -> Outputs:
        return {"most positions in one call": torch.tensor(float(self.most_rows), dtype=torch.float64),
                "cross-attention rows": torch.tensor(float(max(self.cross_rows.values(), default=0)),
                                                     dtype=torch.float64),
                "encoder runs": torch.tensor(float(max(self.encoder_calls.values(), default=0)),
                                             dtype=torch.float64)}


# B sentences (short[b] pads at the end of row b), n_src, bos, eos, max_len; every dimension
# of the model is MODEL_DIMS'. eos ids are chosen so that the sentences end at different steps.
CACHED_CASES = [
    cached_case("post-norm, 1 + 1 blocks, one sentence", 772, (1, 1), [0], 5, 1, 6, 8),
    cached_case("post-norm, 2 + 2 blocks, 3 sentences with padding", 801, (2, 2), [0, 2, 1], 6, 1, 3, 10,
                confident=True),
    cached_case("pre-norm, 2 + 2 blocks, 4 sentences with padding", 796, (2, 2), [1, 0, 3, 2], 6, 1, 6, 10,
                norm_first=True, confident=True),
    cached_case("pre-norm, GELU, 1 + 2 blocks, max_len reached", 773, (1, 2), [0, 2], 5, 1, 9, 7,
                norm_first=True, activation="gelu", confident=True),
    cached_case("pad_id=3, bos_id=5, 2 + 1 blocks", 822, (2, 1), [2, 0, 1], 6, 5, 9, 9, pad=3,
                confident=True),
    cached_case("float32, post-norm, 2 + 2 blocks", 811, (2, 2), [0, 1, 2], 6, 1, 12, 9, torch.float32,
                confident=True),
]


def _mistake(**switch):
    def run(case: Case, device) -> Outputs:
        p = case.params
        model, src = decoding_model(case, device), decoding_source(case, device)
        return {"tokens": until_eos(cached_greedy(model, src, p["bos"], p["eos"], p["max_len"], **switch),
                                    p["eos"])}
    return run


@registered
class GradedGreedyDecodeCached(GreedyDecodeCached, Exercise):
    """On the notebook's Transformer built by the check, against greedy decoding without a cache."""

    mistakes = {POSITION_ZERO: _mistake(position="zero"), POSITION_NEXT: _mistake(position="next"),
                NO_SELF_CACHE: _mistake(self_cache=False), SHARED_CACHE: _mistake(shared_cache=True),
                NO_MEMORY_MASK: _mistake(memory_mask=False), NO_DECODER_NORM: _mistake(decoder_norm=False),
                ALWAYS_POST: _mistake(norm_first=False)}

    def __init__(self):
        self._references: dict[tuple[str, str], torch.Tensor] = {}

    def cases(self):
        return CACHED_CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = decoding_model(case, device), decoding_source(case, device)
        with LayerCounter(model) as counter:
            out = with_how(lambda: self.call(case, impl, model, src, p["bos"], p["eos"], p["max_len"]))
        expect_token_ids(out, f"{self.name}'s result", src.shape[0], p["bos"], p["max_len"], str(case))
        return {"tokens": until_eos(out, p["eos"]), **counter.outputs()}

    def reference(self, case, device):
        key = (case.name, str(device))
        if key not in self._references:
            p = case.params
            model, src = decoding_model(case, device), decoding_source(case, device)
            ys, _ = reference_greedy(model, src, p["bos"], p["eos"], p["max_len"])
            self._references[key] = until_eos(ys, p["eos"])
        return {"tokens": self._references[key].clone()}

    def evaluate(self, case, got, device):
        p = case.params
        have, want = got["tokens"].to("cpu"), self.reference(case, device)["tokens"]
        if have.shape != want.shape or not torch.equal(have, want):
            self._wrong_ids(case, have, want, device)
        message = wrong_counts(int(got["encoder runs"]), int(got["most positions in one call"]),
                               int(got["cross-attention rows"]), len(p["short"]), p["n_src"], str(case))
        if message:
            raise CheckFailure(message)

    def _wrong_ids(self, case: Case, have: torch.Tensor, want: torch.Tensor, device) -> None:
        m = min(have.shape[1], want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong) == 0:
            raise CheckFailure(wrong_length(have.shape[1], want.shape[1], case.params["eos"], str(case)))
        b, i = (int(v) for v in wrong[0])
        message = (f"{self.name}: token {i} of sentence {b} differs from greedy_decode's in {case}; "
                   "the cached decoder must give exactly the same ids.")
        for mistake, run in self.mistakes.items():
            variant = run(case, device)["tokens"].to("cpu")
            if variant.shape == have.shape and torch.equal(variant, have):
                raise CheckFailure(f"{message}\n{mistake.sentence()}", mistake)
        raise CheckFailure(message)
