"""Tests for the section 10.6 corpus (data/fr_en.tsv) and its helpers (course/translation.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest
import torch

from course.translation import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    UNK,
    Vocab,
    data_path,
    load_pairs,
    make_batches,
    pad_batch,
)
from tests.settings import ROOT

TSV = ROOT / "data" / "fr_en.tsv"
SCRIPT = ROOT / "data" / "make_corpus.py"


@pytest.fixture(scope="module")
def splits() -> dict[str, list[tuple[str, str]]]:
    return {s: load_pairs(TSV, split=s) for s in ("train", "valid", "test", "long")}


@pytest.fixture(scope="module")
def vocabs(splits) -> tuple[Vocab, Vocab]:
    train = splits["train"]
    return Vocab.from_sentences(fr for fr, _ in train), Vocab.from_sentences(en for _, en in train)


# --- the corpus file -------------------------------------------------------------------------

def test_generator_rewrites_identical_bytes(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "fr_en.tsv"
    spec = importlib.util.spec_from_file_location("make_corpus", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its dataclasses look their module up
    spec.loader.exec_module(script)
    with contextlib.redirect_stdout(io.StringIO()):
        script.main([str(SCRIPT), str(out)])  # as `python data/make_corpus.py OUT` does
    assert out.read_bytes() == TSV.read_bytes(), "regenerate with: python data/make_corpus.py"


def test_file_is_small_with_expected_header() -> None:
    assert TSV.stat().st_size < 500_000
    assert TSV.read_text(encoding="utf-8").splitlines()[0] == "split\tfrench\tenglish"


def test_split_sizes(splits) -> None:
    assert {s: len(p) for s, p in splits.items()} == {"train": 5000, "valid": 400, "test": 400, "long": 400}
    assert len(load_pairs(TSV)) == 6200


def test_held_out_sentences_not_in_train(splits) -> None:
    sets = {split: {fr for fr, _ in pairs} for split, pairs in splits.items()}
    for a in sets:
        for b in sets:
            assert a == b or not sets[a] & sets[b], (a, b)


def test_long_split_is_longer_than_every_other_sentence(splits) -> None:
    """Is every sentence of "long" longer (in French words) than any train, valid or test one,
    and are there both 8- and 9-word sentences?"""
    shortest_long = min(len(fr.split()) for fr, _ in splits["long"])
    longest_other = max(len(fr.split()) for split in ("train", "valid", "test") for fr, _ in splits[split])
    assert shortest_long > longest_other == 7
    assert {len(fr.split()) for fr, _ in splits["long"]} == {8, 9}


def test_each_french_sentence_has_one_translation() -> None:
    pairs = load_pairs(TSV)
    assert len({fr for fr, _ in pairs}) == len(pairs)


def test_anchor_sentence_is_held_out_with_its_translation(splits) -> None:
    assert ("nous mangeons du pain", "we eat bread") in splits["test"]


def test_sentence_lengths(splits) -> None:
    for fr, en in load_pairs(TSV):
        assert 3 <= len(fr.split()) <= 9 and 3 <= len(en.split()) <= 9, (fr, en)


def test_adjectives_are_reordered(splits) -> None:
    pairs = load_pairs(TSV)
    assert any("le chat noir" in fr and "the black cat" in en for fr, en in pairs)
    assert any("la souris blanche" in fr and "the white mouse" in en for fr, en in pairs)


def test_held_out_words_all_occur_in_train(splits, vocabs) -> None:
    src_vocab, tgt_vocab = vocabs
    for fr, en in splits["valid"] + splits["test"] + splits["long"]:
        assert UNK not in src_vocab.encode(fr) and UNK not in tgt_vocab.encode(en), (fr, en)


# --- loading ---------------------------------------------------------------------------------

def test_default_path_and_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    assert data_path() == TSV
    (tmp_path / "fr_en.tsv").write_text("split\tfrench\tenglish\ntest\tje mange\tI eat\n",
                                        encoding="utf-8")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert load_pairs() == [("je mange", "I eat")]
    assert load_pairs(split="train") == []


def test_unknown_split_is_rejected() -> None:
    with pytest.raises(ValueError):
        load_pairs(TSV, split="dev")


# --- vocabulary and batches ------------------------------------------------------------------

def test_special_token_ids(vocabs) -> None:
    for vocab in vocabs:
        assert vocab.itos[:4] == SPECIALS == ["<pad>", "<bos>", "<eos>", "<unk>"]
        assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
        assert [vocab.stoi[s] for s in SPECIALS] == [0, 1, 2, 3]


def test_vocab_round_trip(splits, vocabs) -> None:
    src_vocab, tgt_vocab = vocabs
    for fr, en in splits["test"]:
        ids = src_vocab.encode(fr)
        assert ids[0] == BOS and ids[-1] == EOS
        assert src_vocab.decode(ids) == fr and tgt_vocab.decode(tgt_vocab.encode(en)) == en


def test_vocab_unknown_words_and_decode_stops_at_eos(vocabs) -> None:
    _, tgt_vocab = vocabs
    ids = tgt_vocab.encode("we eat zebra", add_bos_eos=False)
    assert ids[-1] == UNK and tgt_vocab.decode(ids) == "we eat <unk>"
    we, eat = tgt_vocab.stoi["we"], tgt_vocab.stoi["eat"]
    assert tgt_vocab.decode([BOS, we, eat, EOS, we, PAD]) == "we eat"


def test_vocab_sizes_are_a_few_dozen_words(vocabs) -> None:
    src_vocab, tgt_vocab = vocabs
    assert 40 <= len(tgt_vocab) <= len(src_vocab) <= 120


def test_pad_batch() -> None:
    out = pad_batch([[1, 5, 2], [1, 2]])
    assert out.dtype == torch.long
    assert out.tolist() == [[1, 5, 2], [1, 2, PAD]]


def test_batches_are_padded_correctly(splits, vocabs) -> None:
    src_vocab, tgt_vocab = vocabs
    pairs = splits["valid"]
    batches = make_batches(pairs, src_vocab, tgt_vocab, batch_size=64, shuffle=False)
    assert len(batches) == 7 and sum(src.shape[0] for src, _ in batches) == len(pairs)
    src, tgt = batches[0]
    assert src.dtype == tgt.dtype == torch.long and src.dim() == tgt.dim() == 2
    for (fr, en), s, t in zip(pairs[:64], src, tgt):
        for sentence, row, vocab in ((fr, s, src_vocab), (en, t, tgt_vocab)):
            n = len(sentence.split()) + 2
            assert row[0] == BOS and row[n - 1] == EOS and (row[n:] == PAD).all()
            assert (row[:n] != PAD).all() and vocab.decode(row) == sentence
    assert (src != PAD).sum(1).max() == src.shape[1]  # no column of padding only


def test_shuffled_batches_are_reproducible(splits, vocabs) -> None:
    pairs = splits["valid"]
    a = make_batches(pairs, *vocabs, batch_size=50, seed=3)
    b = make_batches(pairs, *vocabs, batch_size=50, seed=3)
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))
    ordered = make_batches(pairs, *vocabs, batch_size=50, shuffle=False)
    assert not torch.equal(a[0][0], ordered[0][0])
