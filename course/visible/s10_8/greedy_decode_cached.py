"""``greedy_decode_cached``: the exercise and its visible check, on stand-in models with the
notebook's layout: every token the greedy choice of the full decoder, the encoder run once, one new
position per step, the cross-attention keys computed once; its known mistakes and the messages both
sides give."""

from __future__ import annotations

import contextlib
from functools import partial

import torch
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    passed,
    tolerance,
    visible_check,
)
from course.checking.standins import expect_token_ids, stand_in, teacher_forced
from course.decoding import positions_per_call
from course.visible.s10_6.greedy_decode import AFTER_EOS

NAME = "greedy_decode_cached"
NEWEST = ("The newest token sits at the position given by how many tokens come before it (0 for bos_id): "
          "its embedding gets that row of model.pos_encoding.pe.")
POSITION_ZERO = Mistake("position_zero", "every new token embedded at position 0", NEWEST)
POSITION_NEXT = Mistake("position_next", "every new token embedded one position too far", NEWEST)
NO_SELF_CACHE = Mistake("no_self_cache", "self-attention that sees only the newest position",
                        "Look at each block's self-attention: the newest query must see the keys and values "
                        "of every earlier position (from the block's cache) and its own, added to the cache "
                        "before it attends.")
SHARED_CACHE = Mistake("shared_cache", "one cache shared by all decoder blocks",
                       "Each decoder block has its own keys and values: keep one cache per block.")
NO_MEMORY_MASK = Mistake("no_memory_mask", "cross-attention without the source padding mask",
                         "Look at the cross-attention: it must hide the source's padding, with the mask made "
                         "from model.pad_id, as decode does.")
NO_DECODER_NORM = Mistake("no_decoder_norm", "decoder_norm skipped before the output layer",
                          "Look between the last block and model.out: decode applies model.decoder_norm "
                          "there (a LayerNorm when norm_first=True).")
ALWAYS_POST = Mistake("always_post", "post-norm sublayers although the blocks are pre-norm",
                      "Look at the residuals: block.norm_first says whether the norm comes before the "
                      "sublayer (inside the residual) or after the sum, as in DecoderBlock.forward.")
#: The mistakes this check sees, with the switches of teacher_forced that reproduce them.
SWITCHES = {POSITION_ZERO: {"position": "zero"}, POSITION_NEXT: {"position": "next"},
            NO_SELF_CACHE: {"self_mask": "own"}, NO_MEMORY_MASK: {"memory_mask": False},
            NO_DECODER_NORM: {"decoder_norm": False}, ALWAYS_POST: {"norm_first": False}}
HOW = ("The check runs greedy_decode_cached on stand-in models with the notebook's layout (model.encode, "
       "tgt_embed, pos_encoding.pe, decoder_layers with self_attn, cross_attn, ffn, norm1, norm2, norm3 and "
       "norm_first, decoder_norm, out, pad_id): keep your helpers as functions that take these parts, not as "
       "new methods of your classes.")


def cached_case(name: str, seed: int, layers: tuple[int, int], short: list[int], n_src: int, bos: int,
                eos: int, max_len: int, dtype=torch.float64, **options) -> Case:
    """A case: (encoder, decoder) blocks, pads per sentence, n_src, bos_id, eos_id, max_len, and the
    model's ``options`` (norm_first, activation, pad, confident); its kind: post- or pre-norm, or
    another pad_id."""
    kind = "pad_id other than 0" if options.get("pad") else \
        "pre-norm" if options.get("norm_first") else "post-norm"
    return Case(name, seed, {"layers": layers, "short": short, "n_src": n_src, "bos": bos, "eos": eos,
                             "max_len": max_len, **options}, dtype, kind=kind)


CASES = [  # sentences that end at different steps
    cached_case("post-norm, 2 + 2 blocks, 3 sentences with padding", 81, (2, 2), [0, 2, 1], 6, 1, 9, 10),
    cached_case("pre-norm, gelu, 1 + 2 blocks, max_len reached", 11, (1, 2), [1, 0], 5, 1, 3, 8,
                norm_first=True, activation="gelu"),
    cached_case("pad_id=3, bos_id=5, post-norm, 2 + 1 blocks, float32", 39, (2, 1), [2, 0], 6, 5, 6, 9,
                torch.float32, pad=3),
]

def with_how(call):
    """``call()``, with how the check's models are built added to an AttributeError's message."""
    try:
        return call()
    except CheckFailure as failure:
        if "has no attribute" not in str(failure):
            raise
        raise CheckFailure(f"{failure}\n{HOW}") from None


def wrong_length(n: int, want: int, eos: int, where: str) -> str:
    return (f"{NAME} returned {n} tokens per sentence in {where}, greedy decoding {want}: stop when every "
            f"sentence has produced eos_id={eos} or the output has max_len tokens, as greedy_decode does.")


def wrong_counts(encoder_runs: int, most: int, cross: int, B: int, n_src: int, where: str) -> str | None:
    """What the layers' counts say (one encoder run, one new position per call, cross keys once), or None."""
    if encoder_runs != 1:
        return (f"{NAME} ran the encoder {encoder_runs} times in {where}: run it once, before the loop, "
                "and keep its output (the memory).")
    if most == 0:
        return (f"{NAME} never called the decoder blocks' layers in {where} (block.self_attn.w_q(...), "
                "block.ffn(...), block.norm1(...)): call them as modules, not through their weights. "
                "The check "
                "counts the positions each layer processes.")
    if most > B:
        return (f"{NAME}: one call of a decoder layer processed {most} positions in {where}, a batch of {B} "
                "sentences. After the first step each decoder block should process only the newest "
                "position of "
                "each sentence and read the keys and values of the earlier positions from its cache.")
    if cross > B * n_src:
        return (f"{NAME} computed the cross-attention keys and values {cross // (B * n_src)} times in "
                f"{where}: "
                "they depend only on the memory, so compute them once per block, before the loop "
                "(each block's cross_attn.w_k and w_v applied to the memory).")
    return None


def first_non_greedy(ids: list[list[int]], logits: torch.Tensor, eos: int) -> tuple[int, int] | None:
    """The first (sentence, step) whose token is not the greedy choice of ``logits`` (B, n - 1,
    vocab) at the step before (a token within rounding of the best counts as a choice); what
    follows a sentence's eos_id is not looked at. None: every token is a greedy choice."""
    rtol, atol = tolerance(logits.dtype)
    for b, row in enumerate(ids):
        for t in range(1, len(row)):
            scores = logits[b, t - 1]
            best = float(scores.max())
            if not 0 <= row[t] < len(scores) or float(scores[row[t]]) < best - atol - rtol * abs(best):
                return b, t
            if row[t] == eos:
                break
    return None


def after_eos(ids: list[list[int]], eos: int) -> tuple[int, int] | None:
    """The first (sentence, token) after a sentence's first eos_id that is not eos_id; None if none."""
    for b, row in enumerate(ids):
        end = next((t for t in range(1, len(row)) if row[t] == eos), None)
        wrong = [t for t in range(end + 1, len(row)) if row[t] != eos] if end is not None else []
        if wrong:
            return b, wrong[0]
    return None


def greedy_length(ids: list[list[int]], eos: int, max_len: int) -> int:
    """How many tokens greedy decoding returns with these choices: up to the step at which the
    last sentence produced eos_id, or max_len."""
    ends = [next((t for t in range(1, len(row)) if row[t] == eos), None) for row in ids]
    return max_len if None in ends else min(max_len, max(ends) + 1)


@contextlib.contextmanager
def _counting(model: nn.Module):
    """Positions per call (course.decoding.positions_per_call) of the stand-in's encoder blocks,
    of every layer of its decoder blocks, and of their cross-attention w_k and w_v, apart."""
    cross = ("cross_attn.w_k", "cross_attn.w_v")
    with contextlib.ExitStack() as stack:
        def watch(modules):
            return [stack.enter_context(positions_per_call(module)) for module in modules]

        yield {"encoder": watch(model.encoder_layers),
               "decoder": watch(m for block in model.decoder_layers for name, m in block.named_modules()
                                if name not in cross),
               "cross": watch(block.get_submodule(name) for block in model.decoder_layers for name in cross)}


class GreedyDecodeCached(Exercise):
    name = NAME
    reference_name = "greedy decoding without a cache"
    visible_cases = CASES

    def model(self, case: Case, device) -> tuple[nn.Module, torch.Tensor]:
        """The case's stand-in and its source (B, n_src), on ``device``."""
        model, src = stand_in(case)
        return model.to(device), src.to(device)

    def run(self, impl, case, device):
        """The learner's ids on the case's stand-in, and how many positions its layers processed."""
        p = case.params
        model, src = self.model(case, device)
        with torch.no_grad(), _counting(model) as counts:
            tokens = with_how(partial(self.call, case, impl, model, src, p["bos"], p["eos"], p["max_len"]))
            expect_token_ids(tokens, f"{NAME}'s result", src.shape[0], p["bos"], p["max_len"], case)
        counted = (max(len(calls) for calls in counts["encoder"]),
                   max((max(calls, default=0) for calls in counts["decoder"]), default=0),
                   max(sum(calls) for calls in counts["cross"]))
        return {"tokens": tokens, "counts": torch.tensor(counted)}

    def reference(self, case, device):
        return {}  # evaluate checks each token against the stand-in's full decoder

    def evaluate(self, case, got, device):
        """Every token the greedy choice of the full decoder (one teacher-forced pass of PyTorch's
        layers), the right length, the encoder run once, one new position per step, cross keys once."""
        (model, src), p = self.model(case, device), case.params
        tokens = got["tokens"].to(src.device)
        ids, eos = tokens.tolist(), p["eos"]
        with torch.no_grad():
            src_mask = (src != p.get("pad", 0))[:, None, None, :]
            memory = model.encode(src, src_mask)
            logits = teacher_forced(model, tokens[:, :-1], memory, src_mask)  # (B, n - 1, vocab)
            wrong = first_non_greedy(ids, logits, eos)
            mistake = None if wrong is None else self.diagnose(case, model, src, tokens, memory, src_mask)
        if wrong is not None:
            b, t = wrong
            hint = mistake.sentence() if mistake else (
                "Already the first token: check the first step (the embedding of bos_id and the encoding of "
                "position 0, the cross-attention with the source mask, block.norm_first, "
                "model.decoder_norm, one cache per block)."
                if t == 1 else
                "The first tokens agree, later ones do not: look at the position of the newest token, at "
                "what its query attends to (the cached keys of every earlier position and its own), and at "
                "each block keeping its own cache.")
            raise CheckFailure(f"{NAME}: token {t} of sentence {b} is not greedy_decode's in {case} "
                               "(the greedy "
                               f"choice of model.decode on the tokens before it).\n{hint}", mistake)
        after = after_eos(ids, eos)
        if after is not None:
            raise CheckFailure(f"{NAME}: sentence {after[0]} has token {after[1]} after its eos_id={eos} in "
                               f"{case}, where greedy_decode writes eos_id.\n{AFTER_EOS.sentence()}",
                               AFTER_EOS)
        want = greedy_length(ids, eos, p["max_len"])
        if len(ids[0]) != want:
            raise CheckFailure(wrong_length(len(ids[0]), want, eos, case))
        message = wrong_counts(*got["counts"].tolist(), len(p["short"]), p["n_src"], case)
        if message:
            raise CheckFailure(message)

    def diagnose(self, case: Case, model, src, tokens, memory, src_mask) -> Mistake | None:
        """The known mistake whose greedy choices the learner's ids (not greedy decoding's) are."""
        ids, p = tokens.tolist(), case.params
        for mistake, switch in SWITCHES.items():
            logits = teacher_forced(model, tokens[:, :-1], memory, src_mask, **switch)
            if first_non_greedy(ids, logits, p["eos"]) is None and \
                    len(ids[0]) == greedy_length(ids, p["eos"], p["max_len"]):
                return mistake
        return None


@visible_check
def check_greedy_decode_cached(greedy_decode_cached) -> None:
    """On stand-in models with the notebook's layout: every token the greedy choice of the full
    decoder (checked in one teacher-forced pass of PyTorch's layers), the right length, the
    encoder run once, one new position per step, the cross-attention keys computed once."""
    GreedyDecodeCached().run_cases(greedy_decode_cached)
    passed("greedy_decode_cached gives greedy_decode's ids, runs the encoder once, caches keys and values.")
