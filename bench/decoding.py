"""Greedy decoding with and without a cache of keys and values, at the 10.6 model size.

The 10.8 solution's ``greedy_decode`` (10.6's, given: the whole output through the decoder at every
step) against its ``greedy_decode_cached`` (the encoder once, cross-attention keys and values once,
then only the newest position through each decoder block), on the same untrained model and
the same batch of test sentences, timed side by side in alternating rounds
(:func:`bench.timing.interleaved_medians`). The end-of-sentence id given to both is one the
model cannot produce, so every sentence runs to exactly ``output_tokens`` tokens and both do
the same amount of decoding; that both return the same ids is checked and recorded.
"""

from __future__ import annotations

import functools

import torch

from bench.modules import A_10_6, course_transformer, model_config, solution
from bench.timing import calls_per_round, interleaved_medians

A_10_8 = "10.8-decoding"
TARGET_RATIO = 3.0
OUTPUT_TOKENS = 64
BATCHES = (1, 64)  # one sentence; the training batch size of 10.6


def test_sources(batch: int) -> tuple[torch.Tensor, int, int, int]:
    """``batch`` test sentences as ids (batch, n_src), the vocabulary sizes and the pad id."""
    from course.translation import PAD, Vocab, load_pairs, make_batches

    train = load_pairs(split="train")
    src_vocab = Vocab.from_sentences(fr for fr, _ in train)
    tgt_vocab = Vocab.from_sentences(en for _, en in train)
    src, _ = make_batches(load_pairs(split="test")[:batch], src_vocab, tgt_vocab, batch, shuffle=False)[0]
    return src, len(src_vocab), len(tgt_vocab), PAD


def bench_decoding(device: torch.device | str = "cpu", output_tokens: int = OUTPUT_TOKENS,
                   batches=BATCHES, repeats: int = 5, round_s: float = 0.05, cfg=None,
                   log=print) -> dict:
    """``{"config": ..., "batch_<B>": {uncached_s, cached_s, ratio, same_ids, ...}}``."""
    device = torch.device(device)
    ns = solution(A_10_8)
    if ns is None or "greedy_decode_cached" not in ns:
        return {"reason": "the 10.8 solution has no greedy_decode_cached yet"}
    cfg = cfg or model_config(solution(A_10_6))
    report: dict = {"config": {"source": cfg.source, "output_tokens": output_tokens}}
    for batch in batches:
        src, n_src, n_tgt, pad = test_sources(batch)
        torch.manual_seed(0)
        model = course_transformer(ns, n_src, n_tgt, cfg, pad).to(device).eval()
        src = src.to(device)
        never = n_tgt  # an id past the vocabulary: no sentence ends before output_tokens

        fns = {name: functools.partial(ns[fn], model, src, 1, never, output_tokens)
               for name, fn in (("uncached", "greedy_decode"), ("cached", "greedy_decode_cached"))}
        same = torch.equal(fns["uncached"](), fns["cached"]())
        inner = calls_per_round(fns, round_s=round_s, device=device)
        timed = interleaved_medians(fns, repeats=repeats, warmup=1, inner=inner, device=device)
        entry = {
            "batch": batch, "output_tokens": output_tokens,
            "uncached_s": timed["uncached"]["median_s"], "cached_s": timed["cached"]["median_s"],
            "ratio": timed["uncached"]["median_s"] / timed["cached"]["median_s"],
            "target_ratio": TARGET_RATIO, "same_ids": same, "calls_per_round": inner, "rounds": repeats,
            "uncached_samples_s": timed["uncached"]["samples_s"],
            "cached_samples_s": timed["cached"]["samples_s"],
        }
        entry["meets_target"] = same and entry["ratio"] >= TARGET_RATIO
        report[f"batch_{batch}"] = entry
        log(f"  decoding, batch {batch}, {output_tokens} tokens: uncached "
            f"{entry['uncached_s'] * 1e3:.1f} ms, cached {entry['cached_s'] * 1e3:.1f} ms, ratio "
            f"{entry['ratio']:.2f}, same ids {same}")
    return report
