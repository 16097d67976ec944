"""Data helpers for section 10.6: load the French-English pairs, map words to ids, batch.

Typical use::

    train = load_pairs(split="train")                  # [("je mange du pain", "I eat bread"), ...]
    src_vocab = Vocab.from_sentences(fr for fr, _ in train)
    tgt_vocab = Vocab.from_sentences(en for _, en in train)
    batches = make_batches(train, src_vocab, tgt_vocab, batch_size=64, seed=0)
    src, tgt = batches[0]                              # LongTensors (B, n_src), (B, n_tgt)

Sentences are lower-case words separated by single spaces, so a token is a word.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

PAD, BOS, EOS, UNK = 0, 1, 2, 3
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]  # index i is the id of SPECIALS[i]
DATA_FILE = "fr_en.tsv"
DATA_DIR = Path(__file__).resolve().parent.parent / "data"  # the repository's data/
SPLITS = ("train", "valid", "test", "long")  # long: more words than any other

Pair = tuple[str, str]  # (french, english)
Batch = tuple[torch.Tensor, torch.Tensor]  # (src (B, n_src), tgt (B, n_tgt))


def data_path(path: str | os.PathLike | None = None) -> Path:
    """Where the corpus is: ``path``, else ``$COURSE_DATA_DIR/fr_en.tsv``, else the repo's data/."""
    if path is not None:
        return Path(path)
    data_dir = os.environ.get("COURSE_DATA_DIR")
    if data_dir:
        return Path(data_dir) / DATA_FILE
    return DATA_DIR / DATA_FILE


def load_pairs(path: str | os.PathLike | None = None, split: str | None = None) -> list[Pair]:
    """Read (french, english) pairs from the TSV file, keeping only ``split`` if given."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    with open(data_path(path), encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [(r["french"], r["english"]) for r in rows if split in (None, r["split"])]


def tokenize(sentence: str) -> list[str]:
    """Split a sentence into words."""
    return sentence.split()


class Vocab:
    """A two-way map between words and integer ids; ids 0-3 are the special tokens."""

    def __init__(self, words: Iterable[str]) -> None:
        self.itos: list[str] = list(SPECIALS)  # id -> word
        for word in words:
            if word not in SPECIALS:
                self.itos.append(word)
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}  # word -> id
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate words in vocabulary")

    @classmethod
    def from_sentences(cls, sentences: Iterable[str]) -> Vocab:
        """Build a vocabulary of every word in ``sentences``, sorted so it is reproducible."""
        return cls(sorted({w for s in sentences for w in tokenize(s)}))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentence: str, add_bos_eos: bool = True) -> list[int]:
        """Words -> ids (unknown words -> ``<unk>``), wrapped in ``<bos>`` ... ``<eos>``."""
        ids = [self.stoi.get(w, UNK) for w in tokenize(sentence)]
        return [BOS, *ids, EOS] if add_bos_eos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> sentence: skip ``<bos>``/``<pad>``, stop at the first ``<eos>``."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (BOS, PAD):
                words.append(self.itos[i])
        return " ".join(words)


def pad_batch(seqs: Sequence[list[int]], pad_id: int = PAD) -> torch.Tensor:
    """Stack id lists of different lengths into a LongTensor (B, n), padding at the end."""
    n = max(len(s) for s in seqs)
    out = torch.full((len(seqs), n), pad_id, dtype=torch.long)  # (B, n)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def make_batches(
    pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int = 64,
    shuffle: bool = True,
    seed: int | None = None,
) -> list[Batch]:
    """Cut ``pairs`` into padded (src, tgt) batches; both sides start with <bos>, end with <eos>.

    For teacher forcing feed ``tgt[:, :-1]`` to the decoder and predict ``tgt[:, 1:]``.
    ``shuffle`` reorders the pairs first (reproducibly when ``seed`` is given).
    """
    order = list(range(len(pairs)))
    if shuffle:
        random.Random(seed).shuffle(order)
    batches = []
    for start in range(0, len(order), batch_size):
        chunk = [pairs[i] for i in order[start : start + batch_size]]
        src = pad_batch([src_vocab.encode(fr) for fr, _ in chunk])  # (B, n_src)
        tgt = pad_batch([tgt_vocab.encode(en) for _, en in chunk])  # (B, n_tgt)
        batches.append((src, tgt))
    return batches
