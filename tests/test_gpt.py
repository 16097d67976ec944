"""Do the given helpers of 10.7 (course/gpt.py) batch, train, measure and draw as the notebook says?"""

import math

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import gpt
from course.translation import BOS, EOS, PAD, Vocab

matplotlib.use("Agg")

SENTENCES = ["a b", "b", "a a b c"]
VOCAB = Vocab.from_sentences(SENTENCES)  # <pad> <bos> <eos> <unk> a b c


def cross_entropy(logits, targets, pad_id, label_smoothing=0.0):
    """The reference the learner's lm_loss must equal: the contract's stand-in here."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=pad_id,
                           label_smoothing=label_smoothing)


class Bigram(nn.Module):
    """A language model that reads only the current token: ids (B, n) -> logits (B, n, V)."""

    def __init__(self, vocab_size):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, ids):
        return self.table(ids)


def test_batches_wrap_every_sentence_once_in_bos_eos_and_pad_at_the_end():
    """Does every sentence appear once, as <bos> ids <eos> then padding, and is the shuffle seeded?"""
    batches = gpt.lm_batches(SENTENCES, VOCAB, batch_size=2, seed=3)
    assert [b.shape[0] for b in batches] == [2, 1] and all(b.dtype == torch.long for b in batches)
    rows = [row.tolist() for b in batches for row in b]
    unpadded = sorted(tuple(i for i in row if i != PAD) for row in rows)
    assert unpadded == sorted(tuple(VOCAB.encode(s)) for s in SENTENCES)
    for row in rows:
        end = row.index(EOS)
        assert row[0] == BOS and all(i == PAD for i in row[end + 1:])
    again = gpt.lm_batches(SENTENCES, VOCAB, batch_size=2, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(batches, again))
    in_order = gpt.lm_batches(SENTENCES, VOCAB, batch_size=3, shuffle=False)[0]
    assert in_order[1].tolist()[:3] == VOCAB.encode("b")


def test_sentences_are_the_english_side_of_each_split():
    """Are the 10.7 sentences the English side of the corpus, split by split?"""
    train, test = gpt.load_sentences("train"), gpt.load_sentences("test")
    assert (len(train), len(test)) == (5000, 400)
    assert test[0] == "we eat bread" and train[0] == "he eats white soup"


def test_unigram_perplexity_by_hand():
    """Is the unigram baseline exp of the mean -log frequency of the test's words and <eos>?"""
    # train tokens (no <bos>): a b <eos> | b <eos> | a a b c <eos>: a 3, b 3, c 1, <eos> 3 of 10
    expected = math.exp(-(math.log(0.3) + math.log(0.3)) / 2)  # test "b": b, <eos>
    assert gpt.unigram_perplexity(SENTENCES, ["b"], VOCAB) == pytest.approx(expected)
    with pytest.raises(ValueError, match="never seen in training"):
        gpt.unigram_perplexity(["a"], ["c"], VOCAB)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    """Is perplexity exp of the mean cross-entropy per predicted token, padding left out?"""
    model = Bigram(len(VOCAB))
    nn.init.zeros_(model.table.weight)  # the same logit for every token
    assert gpt.perplexity(model, SENTENCES, VOCAB, cross_entropy, batch_size=2) == pytest.approx(len(VOCAB))
    nn.init.normal_(model.table.weight)
    ids = gpt.lm_batches(SENTENCES, VOCAB, shuffle=False)[0]
    expected = math.exp(cross_entropy(model(ids[:, :-1]), ids[:, 1:], PAD).item())
    measured = gpt.perplexity(model, SENTENCES, VOCAB, cross_entropy, batch_size=2)
    assert measured == pytest.approx(expected, rel=1e-5)


def test_training_follows_the_schedule_and_learns():
    """Does train_lm run exactly `steps` steps over several passes, at lr_at(step), and lower the loss?"""
    torch.manual_seed(0)
    model = Bigram(len(VOCAB))
    calls = []

    def loss_fn(logits, targets, pad_id, label_smoothing):
        calls.append((pad_id, label_smoothing))
        return cross_entropy(logits, targets, pad_id, label_smoothing)

    history = gpt.train_lm(model, SENTENCES, VOCAB, loss_fn, lambda step: 0.1 / (step + 1), steps=7,
                           batch_size=2, label_smoothing=0.2, progress=False)
    assert len(history.losses) == len(history.lrs) == 7
    assert history.lrs == pytest.approx([0.1 / (step + 1) for step in range(7)])
    assert calls == [(PAD, 0.2)] * 7 and not model.training
    before = history.losses[0]
    history = gpt.train_lm(model, SENTENCES, VOCAB, cross_entropy, lambda step: 0.1, steps=30, progress=False)
    assert history.losses[-1] < before


def test_gpt2_init_draws_linear_and_embedding_weights_small_and_keeps_norms():
    """Does gpt2_init give N(0, 0.02²) weights, zero biases, and leave LayerNorm alone?"""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(500, 64), nn.Linear(64, 64), nn.LayerNorm(64))
    gpt.gpt2_init(model)
    for weight in (model[0].weight, model[1].weight):
        assert weight.std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.all(model[1].bias == 0) and torch.all(model[2].weight == 1)


def test_one_thread_restores_the_thread_count():
    """Does one_thread run on one thread and give the previous count back?"""
    threads = torch.get_num_threads()
    with gpt.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads


def test_figures_draw_a_panel_per_setting():
    """Do the figures draw: loss beside schedule, several losses, one bar chart per setting?"""
    history = gpt.History(losses=[3.0, 2.5, 2.0, 1.9] * 10, lrs=[0.1] * 40)
    loss_ax, lr_ax = gpt.loss_and_schedule(history)
    assert len(lr_ax.lines) == 1 and len(loss_ax.lines) == 2
    assert len(gpt.compare_losses({"a": history, "b": history}).lines) == 2
    probs = torch.softmax(torch.randn(len(VOCAB)), dim=-1)
    kept = probs * (probs >= probs.topk(2).values[-1])
    fig = gpt.distributions({"T = 1": probs, "top-k = 2": kept / kept.sum()}, VOCAB.itos, top=5)
    assert len(fig.axes) == 2 and fig.axes[1].get_title().endswith("2 words kept")
    matplotlib.pyplot.close("all")


def test_decode_marks_the_end_or_its_absence():
    """Does decode show where a sentence ended, and that an unfinished one goes on?"""
    assert gpt.decode(VOCAB, [BOS, *VOCAB.encode("a b", add_bos_eos=False), EOS, EOS]) == "a b <eos>"
    assert gpt.decode(VOCAB, [BOS, VOCAB.stoi["c"]]) == "c ..."


@pytest.mark.slow
def test_the_recipe_beats_the_unigram_baseline(monkeypatch, record_property):
    """Does the notebook's recipe train the solution GPT, on the CPU, to a held-out perplexity
    well below the unigram baseline, and does the cached sampler write what sample writes?"""
    from samples import load_solution_namespace

    monkeypatch.delenv("COURSE_QUICK", raising=False)  # the full recipe, as a learner runs it
    monkeypatch.delenv("COURSE_GRADING_DIR", raising=False)
    ns = load_solution_namespace("10.7-gpt")
    train, test = gpt.load_sentences("train"), gpt.load_sentences("test")
    vocab = Vocab.from_sentences(train)
    model = ns["new_model"](len(vocab))
    history = gpt.train_lm(model, train, vocab, ns["lm_loss"], ns["lr_at"], ns["STEPS"],
                           label_smoothing=ns["LABEL_SMOOTHING"], progress=False)
    held_out = gpt.perplexity(model, test, vocab, ns["lm_loss"])
    unigram = gpt.unigram_perplexity(train, test, vocab)
    print(f"10.7 GPT: {len(history.losses)} steps in {history.seconds:.1f} s, held-out perplexity "
          f"{held_out:.2f}, unigram baseline {unigram:.2f}")
    record_property("train_seconds", round(history.seconds, 1))
    record_property("perplexity", round(held_out, 3))
    record_property("unigram_perplexity", round(unigram, 3))
    assert len(history.losses) == ns["STEPS"] == 400
    assert held_out < unigram / 3, f"held-out perplexity {held_out:.2f} against the unigram's {unigram:.2f}"
    start = torch.full((16, 1), BOS, device=next(model.parameters()).device)
    written = [write(model, start, 12, generator=torch.Generator(start.device).manual_seed(1), eos_id=EOS)
               for write in (ns["sample"], ns["sample_cached"])]
    assert torch.equal(*written)
