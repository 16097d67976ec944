"""Reference training run for section 10.6: does the recipe reach the exact-match target?

Trains ``torch.nn.Transformer`` (post-norm, ReLU, batch_first) with learned embeddings,
sinusoidal positions and a final linear layer on ``data/fr_en.tsv``, then greedy-decodes
the valid, test and long splits and prints whole-sentence exact match.  Usage::

    python data/train_reference.py --seed 0          # the default recipe
    python data/train_reference.py --seed 1 --steps 200 --show-errors 10

Default recipe (the notebook's learner-built model should follow it): d_model 64, 4 heads,
d_ff 128, 2 encoder + 2 decoder layers, dropout 0, embeddings NOT scaled by sqrt(d_model),
batch 64, Adam(lr 2e-3, betas (0.9, 0.98)), 50 warm-up steps then linear decay to 0,
gradient clipping at 1.0, label smoothing 0.1, 300 steps (about 4 epochs).
Results and times for seeds 0, 1, 2 are in data/README.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course.translation import (  # noqa: E402
    BOS,
    EOS,
    PAD,
    Pair,
    Vocab,
    load_pairs,
    make_batches,
)


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The fixed positional encoding of "Attention Is All You Need": (max_len, d_model)."""
    pos = torch.arange(max_len).unsqueeze(1)  # (max_len, 1)
    freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # (d/2,)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class Translator(nn.Module):
    """Embeddings + positions -> nn.Transformer -> linear layer over the target vocabulary."""

    def __init__(self, n_src: int, n_tgt: int, d_model: int, nhead: int, d_ff: int,
                 layers: int, dropout: float, emb_scale: float = 1.0, max_len: int = 32) -> None:
        super().__init__()
        self.emb_scale = emb_scale  # 1.0: embeddings (std 1) and positions have similar size
        self.src_embed = nn.Embedding(n_src, d_model)
        self.tgt_embed = nn.Embedding(n_tgt, d_model)
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))
        self.transformer = nn.Transformer(
            d_model, nhead, layers, layers, d_ff, dropout, batch_first=True)
        self.transformer.encoder.use_nested_tensor = False  # keep eval on the plain code path
        # nn.Transformer adds a final LayerNorm after each stack; a post-norm stack written by
        # hand ends with its last layer's LayerNorm, so drop the extra ones to match it.
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None
        self.out = nn.Linear(d_model, n_tgt)

    def embed(self, table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        """(B, n) ids -> (B, n, d_model) scaled embeddings plus positions."""
        return table(ids) * self.emb_scale + self.pe[: ids.shape[1]]

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(B, n_src) -> memory (B, n_src, d_model)."""
        return self.transformer.encoder(
            self.embed(self.src_embed, src), src_key_padding_mask=src == PAD)

    def decode(self, memory: torch.Tensor, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """(B, n_tgt) decoder input -> logits (B, n_tgt, n_tgt_vocab)."""
        n = tgt_in.shape[1]
        causal = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)  # (n, n), True = hidden
        h = self.transformer.decoder(
            self.embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
            tgt_key_padding_mask=tgt_in == PAD, memory_key_padding_mask=src == PAD,
            tgt_is_causal=True)
        return self.out(h)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(src), src, tgt_in)


@torch.no_grad()
def greedy_decode(model: Translator, src: torch.Tensor, max_len: int = 20) -> torch.Tensor:
    """(B, n_src) -> (B, <= max_len) ids: start at <bos>, take the argmax, stop at <eos>."""
    memory = model.encode(src)
    out = torch.full((src.shape[0], 1), BOS, dtype=torch.long)  # (B, 1)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len - 1):
        nxt = model.decode(memory, src, out)[:, -1].argmax(-1)  # (B,)
        nxt = nxt.masked_fill(done, PAD)
        out = torch.cat([out, nxt.unsqueeze(1)], dim=1)
        done |= nxt == EOS
        if done.all():
            break
    return out


def exact_match(model: Translator, pairs: list[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
                show_errors: int = 0) -> float:
    """Fraction of pairs whose greedy translation equals the reference exactly."""
    model.eval()
    src, _ = make_batches(pairs, src_vocab, tgt_vocab, len(pairs), shuffle=False)[0]
    guesses = [tgt_vocab.decode(ids) for ids in greedy_decode(model, src)]
    model.train()
    errors = [(fr, en, g) for (fr, en), g in zip(pairs, guesses) if g != en]
    for fr, en, guess in errors[:show_errors]:
        print(f"  {fr}  ->  {guess}   (expected: {en})")
    return 1 - len(errors) / len(pairs)


def lr_at(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up, then linear decay to 0 at the last step (or constant with --no-decay)."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    if args.no_decay:
        return args.lr
    return args.lr * (args.steps - step) / (args.steps - args.warmup)


def train_step(model: Translator, opt: torch.optim.Optimizer, loss_fn: nn.Module,
               src: torch.Tensor, tgt: torch.Tensor, clip: float) -> float:
    """One teacher-forced update on a batch src (B, n_src), tgt (B, n_tgt); returns the loss."""
    logits = model(src, tgt[:, :-1])  # (B, n_tgt - 1, V): predict each next word
    loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    if clip:
        nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.item()


def train(model: Translator, pairs: list[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
          args: argparse.Namespace) -> None:
    """Run ``args.steps`` updates over reshuffled epochs of ``pairs``."""
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=args.smoothing)
    t0, step, epoch = time.perf_counter(), 0, 0
    while step < args.steps:
        for src, tgt in make_batches(pairs, src_vocab, tgt_vocab, args.batch_size,
                                     seed=args.seed * 1000 + epoch):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, args)
            loss = train_step(model, opt, loss_fn, src, tgt, args.clip)
            step += 1
            if step % args.log_every == 0 or step == args.steps:
                print(f"step {step:5d}  loss {loss:.4f}  {time.perf_counter() - t0:6.1f}s")
            if step == args.steps:
                return
        epoch += 1


def main(args: argparse.Namespace) -> None:
    """Load data, train, evaluate; the times include everything from loading the data on."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0, cpu0 = time.perf_counter(), time.process_time()
    train_pairs = load_pairs(split="train")
    src_vocab = Vocab.from_sentences(fr for fr, _ in train_pairs)
    tgt_vocab = Vocab.from_sentences(en for _, en in train_pairs)
    model = Translator(len(src_vocab), len(tgt_vocab), args.d_model, args.heads, args.d_ff,
                       args.layers, args.dropout, args.emb_scale)
    print(f"vocab fr={len(src_vocab)} en={len(tgt_vocab)} "
          f"params={sum(p.numel() for p in model.parameters())}")
    train(model, train_pairs, src_vocab, tgt_vocab, args)
    t_train = time.perf_counter() - t0
    valid = exact_match(model, load_pairs(split="valid"), src_vocab, tgt_vocab, args.show_errors)
    test = exact_match(model, load_pairs(split="test"), src_vocab, tgt_vocab, args.show_errors)
    long = exact_match(model, load_pairs(split="long"), src_vocab, tgt_vocab, args.show_errors)
    print(f"RESULT seed={args.seed} steps={args.steps} train_s={t_train:.1f} "
          f"total_s={time.perf_counter() - t0:.1f} cpu_s={time.process_time() - cpu0:.1f} "
          f"valid_em={valid:.4f} test_em={test:.4f} long_em={long:.4f}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--no-decay", action="store_true", help="constant lr after warm-up")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm, 0 = no clipping")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--emb-scale", type=float, default=1.0)
    p.add_argument("--smoothing", type=float, default=0.1)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--show-errors", type=int, default=0, help="print this many mistakes")
    return p.parse_args(argv)


if __name__ == "__main__":
    main(parse_args())
