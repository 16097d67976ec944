"""Tools for 10.8 (decoding): counting what a layer processes, timing decoders, a cache for the GPT,
and the corpus's grammar (to score what a model writes)."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course.floor import GrammarModel
from course.translation import DATA_DIR, data_path

GRAMMAR_FILE = "make_corpus.py"


def grammar_module() -> ModuleType:
    """The corpus's generator, ``data/make_corpus.py``, as a module (its nouns, adjectives, verbs
    and probabilities); found next to the corpus file, or in the repository's data/."""
    if "make_corpus" in sys.modules:
        return sys.modules["make_corpus"]
    for folder in dict.fromkeys((data_path().parent, DATA_DIR)):
        path = Path(folder) / GRAMMAR_FILE
        if path.is_file():
            spec = importlib.util.spec_from_file_location("make_corpus", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules["make_corpus"] = module  # its dataclasses look themselves up there
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"the corpus's grammar ({GRAMMAR_FILE}) is neither next to {data_path()} nor in "
                            f"{DATA_DIR}: run the notebook from the course's folder, or set COURSE_DATA_DIR "
                            "to a folder holding fr_en.tsv and make_corpus.py")


def grammar(min_words: int = 1, max_words: int = 99) -> GrammarModel:
    """The grammar's English sentences whose French has ``min_words`` to ``max_words`` words, as a
    distribution: ``grammar().log_prob("the dog eats bread")`` is the exact log-probability, -inf
    for a sentence the grammar cannot write (by default every length: -inf means ungrammatical)."""
    return GrammarModel(grammar_module(), min_words, max_words)


@contextlib.contextmanager
def positions_per_call(module: nn.Module) -> Iterator[list[int]]:
    """For every call of ``module`` inside the block, the number of positions it processed.

    A position of one sentence is one row of the input: ``B * n`` for an input (B, n, d)::

        with positions_per_call(model.decoder_layers[0].self_attn.w_k) as calls:
            greedy_decode(model, src, BOS, EOS, 10)
        calls  # [B, 2 * B, 3 * B, ...] without a cache; [B, B, B, ...] with one
    """
    calls: list[int] = []

    def count(layer, inputs, output):
        x = inputs[0] if inputs else None  # None: called with keyword arguments only
        if isinstance(x, torch.Tensor):
            calls.append(x.numel() // x.shape[-1] if x.dim() else 1)

    handle = module.register_forward_hook(count)
    try:
        yield calls
    finally:
        handle.remove()


def time_decoders(decoders: Mapping[str, Callable], model: nn.Module, src: torch.Tensor,
                  lengths: Sequence[int], *, bos_id: int = 1, min_run_time: float = 0.2,
                  threads: int = 1) -> dict:
    """Seconds per call of each ``decoder(model, src, bos_id, eos_id, max_len)`` for every
    output length in ``lengths``, measured with ``torch.utils.benchmark``.

    ``eos_id`` is an id the model cannot predict (its vocabulary size), so every sentence
    runs to ``max_len`` tokens and both decoders do the same amount of work.
    """
    from torch.utils import benchmark

    never = model.out.out_features  # one past the last id of the vocabulary
    seconds: dict[str, list[float]] = {name: [] for name in decoders}
    for n in lengths:
        for name, decode in decoders.items():
            timer = benchmark.Timer(
                "decode(model, src, bos_id, eos_id, max_len)", num_threads=threads,
                globals={"decode": decode, "model": model, "src": src, "bos_id": bos_id,
                         "eos_id": never, "max_len": n})
            seconds[name].append(timer.blocked_autorange(min_run_time=min_run_time).median)
    return {"lengths": list(lengths), "seconds": seconds, "batch": src.shape[0], "threads": threads}


def decoding_times(times: Mapping, *, title: str = "Greedy decoding with and without a cache"):
    """Left: time per translation batch against the output length (log-log). Right: how many
    times faster the first decoder is than the second, at each length."""
    lengths, seconds = times["lengths"], times["seconds"]
    fig, (ax_time, ax_ratio) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, values in seconds.items():
        ax_time.loglog(lengths, [s * 1e3 for s in values], "o-", label=name)
    ax_time.set(title=f"One batch of {times['batch']} sentences", xlabel="output length (tokens)",
                ylabel="milliseconds")
    (slow, slow_s), (fast, fast_s) = list(seconds.items())[:2]
    ratios = [a / b for a, b in zip(slow_s, fast_s)]
    ax_ratio.plot(lengths, ratios, "o-", color="tab:green")
    for n, r in zip(lengths, ratios):
        ax_ratio.annotate(f"{r:.1f}×", (n, r), textcoords="offset points", xytext=(0, 6), ha="center")
    ax_ratio.set(title=f"{slow} / {fast}", xlabel="output length (tokens)", ylabel="times faster",
                 ylim=(0, max(ratios) * 1.25))
    ax_ratio.set_xscale("log")
    for ax in (ax_time, ax_ratio):
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
    ax_time.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


class KVCachedGPT(nn.Module):
    """A trained GPT of 10.7 (pre-norm blocks, in eval mode, prompts without padding) behind a
    cache of self-attention keys and values.

    Called with the ids of its previous call plus one new token, it pushes only the new position
    through the blocks; any other ids start the cache afresh. It returns the logits of the
    positions it processed, ``(B, m, V)``, so ``model(ids)[:, -1]`` is the next token's logits
    either way, and a sampling loop written for the GPT runs on it unchanged. ``pos_embed`` is
    the GPT's (the loop reads ``max_len`` from it).
    """

    def __init__(self, gpt: nn.Module):
        super().__init__()
        self.gpt, self.pos_embed = gpt, gpt.pos_embed
        self._ids: torch.Tensor | None = None
        self._keys: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, n) -> logits (B, m, V) of the m positions not in the cache yet."""
        extends = (self._ids is not None and ids.shape[0] == self._ids.shape[0]
                   and ids.shape[1] == self._ids.shape[1] + 1 and torch.equal(ids[:, :-1], self._ids))
        start = self._ids.shape[1] if extends else 0  # the positions already cached
        if not extends:
            self._keys, self._values = [], []
        self._ids = ids
        new = ids[:, start:]  # (B, m)
        positions = torch.arange(start, ids.shape[1], device=ids.device)  # (m,)
        x = self.gpt.tok_embed(new) + self.gpt.pos_embed(positions)  # (B, m, d_model)
        for i, block in enumerate(self.gpt.blocks):
            x = x + self._attend(i, block.self_attn, block.norm1(x), start)
            x = x + block.ffn(block.norm2(x))
        return self.gpt.lm_head(self.gpt.norm(x))  # (B, m, V)

    def _attend(self, i: int, attention: nn.Module, y: torch.Tensor, start: int) -> torch.Tensor:
        """Self-attention of the new positions y (B, m, d) to block i's cache and to themselves."""
        B, m, d = y.shape  # batch, new positions, d_model
        h = attention.num_heads

        def heads(t):  # (B, m, d) -> (B, h, m, d // h)
            return t.view(B, m, h, d // h).transpose(1, 2)

        k, v = heads(attention.w_k(y)), heads(attention.w_v(y))
        if start:  # (B, h, start + m, d // h): the cached positions, then the new ones
            k, v = torch.cat([self._keys[i], k], dim=2), torch.cat([self._values[i], v], dim=2)
            self._keys[i], self._values[i] = k, v
        else:
            self._keys.append(k)
            self._values.append(v)
        # (m, start + m): new position j sees the cache and the new positions up to itself
        sees = torch.ones(m, start + m, dtype=torch.bool, device=y.device).tril(diagonal=start)
        out = F.scaled_dot_product_attention(heads(attention.w_q(y)), k, v, attn_mask=sees)  # (B, h, m, d_k)
        return attention.w_o(out.transpose(1, 2).reshape(B, m, d))
