"""Do the given helpers of 10.7 (course/gpt.py, lm_eval.py, floor.py) batch, train, measure and
draw as the notebook says, and is the data's floor the entropy of the sentences make_corpus.py writes?"""

import importlib.util
import math
import random
import sys
from dataclasses import astuple

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course import gpt
from course.floor import LONG_FLOOR, SHORT_FLOOR, GrammarModel, grammar_floor
from course.lm_eval import (
    CountLM,
    Score,
    best_bigram_weight,
    length_table,
    perplexity_by_position,
    perplexity_table,
    position_table,
    positions_seen,
    score_model,
    stops_where_words_go_on,
    unseen_sentences,
)
from course.translation import BOS, EOS, PAD, Vocab, tokenize
from samples import load_solution_namespace
from tests.settings import ROOT

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


def test_one_thread_restores_the_thread_count():
    """Does one_thread run on one thread and give the previous count back?"""
    threads = torch.get_num_threads()
    with gpt.one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads


def test_decode_marks_the_end_or_its_absence():
    """Does decode show where a sentence ended, and that an unfinished one goes on?"""
    assert gpt.decode(VOCAB, [BOS, *VOCAB.encode("a b", add_bos_eos=False), EOS, EOS]) == "a b <eos>"
    assert gpt.decode(VOCAB, [BOS, VOCAB.stoi["c"]]) == "c ..."




# ---------------------------------------------------------------- training


def lm_step(*args):
    """The notebook's given language-model step (10.7's recipe cell): the course package ships none."""
    return load_solution_namespace("10.7-gpt")["lm_step"](*args)


def test_lm_step_shifts_zeroes_clips_and_steps_the_schedule():
    """Does 10.7's given step read ids[:, :-1], score ids[:, 1:], use this batch's gradients only (zeroed
    first), clip them, then step the optimiser and the schedule?"""
    torch.manual_seed(0)
    model, ids = Bigram(len(VOCAB)), gpt.lm_batches(SENTENCES, VOCAB, shuffle=False)[0]  # (3, 6)
    seen = []

    def loss_fn(logits, targets, pad_id, label_smoothing):
        seen.append((logits.shape, targets, pad_id, label_smoothing))
        return 100 * cross_entropy(logits, targets, pad_id, label_smoothing)  # big gradients: clipped

    before = model.table.weight.detach().clone()
    loss_fn(model(ids[:, :-1]), ids[:, 1:], PAD, 0.1).backward()
    fresh = model.table.weight.grad.clone()  # this batch's gradient alone
    model.table.weight.grad = torch.full_like(before, 7.0)  # stale: must not count
    seen.clear()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)
    loss = lm_step(model, ids, optimizer, schedule, loss_fn, 0.1)
    assert seen[0][0] == (3, ids.shape[1] - 1, len(VOCAB)) and torch.equal(seen[0][1], ids[:, 1:])
    assert seen[0][2:] == (PAD, 0.1) and isinstance(loss, float)
    step = before - model.table.weight.detach()  # lr 1: the step is the clipped gradient
    assert torch.allclose(step, fresh * 1.0 / fresh.norm(), atol=1e-6)  # clipped to norm 1
    assert optimizer.param_groups[0]["lr"] == 0.5


def test_param_groups_decay_linear_weights_only():
    """Is weight decay on the Linear weights only: not on biases, norms, embeddings or a Linear
    tied to an embedding, with every parameter in exactly one group?"""
    model = nn.ModuleDict({"embed": nn.Embedding(7, 4), "proj": nn.Linear(4, 4), "norm": nn.LayerNorm(4),
                           "head": nn.Linear(4, 7, bias=False)})
    model["head"].weight = model["embed"].weight  # tied
    decay, no_decay = gpt.param_groups(model, 0.1)
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)
    assert [id(p) for p in decay["params"]] == [id(model["proj"].weight)]
    everything = {id(p) for p in model.parameters()}
    assert {id(p) for p in no_decay["params"]} == everything - {id(model["proj"].weight)}
    assert len(no_decay["params"]) == len(everything) - 1


def test_gpt2_init_scales_the_residual_projections():
    """Does gpt2_init draw weights from N(0, 0.02²), the N residual projections (w_o, linear2, w2)
    from N(0, 0.02² / N), zero the biases and leave the norms alone?"""
    torch.manual_seed(0)

    def block():
        linears = lambda *names: nn.ModuleDict({name: nn.Linear(256, 256) for name in names})  # noqa: E731
        return nn.ModuleDict({"attn": linears("w_q", "w_o"), "ffn": linears("linear1", "linear2"),
                              "norm": nn.LayerNorm(256)})

    model = nn.ModuleDict({"embed": nn.Embedding(500, 256), "blocks": nn.ModuleList([block(), block()])})
    gpt.gpt2_init(model)
    assert model["embed"].weight.std().item() == pytest.approx(0.02, rel=0.05)
    for b in model["blocks"]:
        assert b["attn"]["w_q"].weight.std().item() == pytest.approx(0.02, rel=0.05)
        for residual in (b["attn"]["w_o"], b["ffn"]["linear2"]):
            assert residual.weight.std().item() == pytest.approx(0.02 / math.sqrt(4), rel=0.05)
        assert torch.all(b["ffn"]["linear2"].bias == 0) and torch.all(b["norm"].weight == 1)


def test_training_follows_the_schedule_records_validation_and_learns():
    """Does train_lm run exactly `steps` steps over several passes at lr_at(step), with AdamW's
    groups, record the validation loss every eval_every steps and after the last, and learn?"""
    torch.manual_seed(0)
    model, calls = Bigram(len(VOCAB)), []

    def step(model, ids, optimizer, scheduler, loss_fn, label_smoothing):
        calls.append(([g["weight_decay"] for g in optimizer.param_groups], label_smoothing))
        return lm_step(model, ids, optimizer, scheduler, loss_fn, label_smoothing)

    history = gpt.train_lm(model, SENTENCES, VOCAB, cross_entropy, lambda step: 0.1 / (step + 1), steps=7,
                           batch_size=2, label_smoothing=0.2, valid=SENTENCES[:2], eval_every=3, step=step,
                           progress=False)
    assert len(history.losses) == len(history.lrs) == 7 and calls == [([0.1, 0.0], 0.2)] * 7
    assert history.lrs == pytest.approx([0.1 / (step + 1) for step in range(7)])
    assert history.val_steps == [3, 6, 7] and not model.training
    batches = [ids for epoch in range(4) for ids in gpt.lm_batches(SENTENCES, VOCAB, 2, seed=epoch)][:7]
    assert history.positions == sum(ids[:, :-1].numel() for ids in batches)  # what the 7 steps read
    assert 0 < history.eval_seconds < history.seconds
    assert history.val_losses[-1] == pytest.approx(
        score_model(model, SENTENCES[:2], VOCAB, cross_entropy).nats_per_token())
    before = history.losses[0]
    history = gpt.train_lm(model, SENTENCES, VOCAB, cross_entropy, lambda step: 0.1, steps=30, step=lm_step,
                           progress=False)
    assert history.losses[-1] < before and history.val_steps == []


def test_training_curves_draw_loss_validation_floor_and_rate():
    """Does the figure draw, per run, the training and validation losses beside its learning rate,
    and the floor?"""
    history = gpt.History(losses=[3.0, 2.5, 2.0, 1.9] * 10, lrs=[0.1] * 40, val_steps=[20, 40],
                          val_losses=[2.2, 2.0])
    loss_ax, lr_ax = gpt.training_curves({"GPT": history, "Llama": history}, SHORT_FLOOR)
    assert len(loss_ax.lines) == 5 and len(lr_ax.lines) == 2  # 2 × (training, validation) + the floor
    assert list(loss_ax.lines[1].get_xdata()) == [19, 39] and list(loss_ax.lines[1].get_ydata()) == [2.2, 2.0]
    assert loss_ax.lines[-1].get_ydata()[0] == pytest.approx(SHORT_FLOOR.nats_per_token)
    assert len(gpt.compare_losses({"a": history, "b": history}).lines) == 2
    probs = torch.softmax(torch.randn(len(VOCAB)), dim=-1)
    kept = probs * (probs >= probs.topk(2).values[-1])
    fig = gpt.distributions({"T = 1": probs, "top-k = 2": kept / kept.sum()}, VOCAB.itos, top=5)
    assert len(fig.axes) == 2 and fig.axes[1].get_title().endswith("2 words kept")
    matplotlib.pyplot.close("all")


# ---------------------------------------------------------------- scores and baselines


def per_token_nll(model, sentences, vocab):
    """-log p of every predicted token, by position: the reference for score_model, written directly."""
    rows = {}
    for sentence in sentences:
        ids = torch.tensor([vocab.encode(sentence)])  # (1, n)
        nll = F.cross_entropy(model(ids[:, :-1])[0], ids[0, 1:], reduction="none")  # (n - 1,)
        for t, value in enumerate(nll.tolist()):
            rows.setdefault(t, []).append(value)
    return rows


def test_score_model_sums_the_loss_position_by_position():
    """Does score_model give, at every position, the sum of -log p of the tokens predicted there
    and their number, padding left out, whatever the batch size?"""
    torch.manual_seed(0)
    model = Bigram(len(VOCAB))
    expected = per_token_nll(model, SENTENCES, VOCAB)
    for batch_size in (1, 2, 3):
        score = score_model(model, SENTENCES, VOCAB, cross_entropy, batch_size=batch_size)
        assert score.count == tuple(len(expected[t]) for t in range(len(expected))) == (3, 3, 2, 1, 1)
        assert score.nll == pytest.approx([sum(expected[t]) for t in range(len(expected))], rel=1e-5)
    everything = [v for values in expected.values() for v in values]
    assert score.perplexity() == pytest.approx(math.exp(sum(everything) / len(everything)), rel=1e-5)
    assert gpt.perplexity(model, SENTENCES, VOCAB, cross_entropy) == pytest.approx(score.perplexity())
    assert score.perplexity(2) == pytest.approx(math.exp(sum(expected[2] + expected[3] + expected[4]) / 4),
                                                rel=1e-5)


def test_score_model_counts_words_or_eos_only_when_asked():
    """Do the words' and <eos>'s scores count only their own tokens and add up to the whole score,
    position by position; and is an unknown kind of target an error that lists the known ones?"""
    torch.manual_seed(0)
    model = Bigram(len(VOCAB))
    expected = per_token_nll(model, SENTENCES, VOCAB)
    whole = score_model(model, SENTENCES, VOCAB, cross_entropy)
    words = score_model(model, SENTENCES, VOCAB, cross_entropy, targets="words")
    eos = score_model(model, SENTENCES, VOCAB, cross_entropy, targets="<eos>", batch_size=2)
    # "a b", "b", "a a b c": <eos> is predicted at target positions 2, 1 and 4
    assert words.count == (3, 2, 1, 1) and eos.count == (0, 1, 1, 0, 1)
    assert eos.nll[4] == pytest.approx(expected[4][0], rel=1e-5)  # the only token at position 4
    for t, count in enumerate(whole.count):
        in_words = words.count[t] if t < len(words.count) else 0
        assert in_words + eos.count[t] == count
        assert (words.nll[t] if in_words else 0.0) + eos.nll[t] == pytest.approx(whole.nll[t], rel=1e-5)
    with pytest.raises(ValueError, match="'all', 'words', '<eos>'"):
        score_model(model, SENTENCES, VOCAB, cross_entropy, targets="nouns")


class AlwaysStops(nn.Module):
    """Logits that favour <eos> at the positions from ``at`` on, the first word before: records the
    lengths it reads."""

    def __init__(self, vocab_size, at):
        super().__init__()
        self.vocab_size, self.at, self.lengths = vocab_size, at, []
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, ids):
        self.lengths.append(ids.shape[1])
        B, n = ids.shape
        logits = torch.zeros(B, n, self.vocab_size)
        logits[:, :, EOS] = torch.where(torch.arange(n) >= self.at, 2.0, -2.0)
        return logits + self.dummy


def test_stops_where_words_go_on_counts_the_sentences_that_continue():
    """Does it look only at the sentences with a word at the position, give <eos>'s mean probability
    there and how often <eos> comes first, read at most ``window`` tokens, and refuse a position no
    sentence reaches?"""
    model = AlwaysStops(len(VOCAB), at=1)
    stops = stops_where_words_go_on(model, SENTENCES, VOCAB, 1)  # "a b" and "a a b c" go on after word 1
    p = math.exp(2.0) / (math.exp(2.0) + len(VOCAB) - 1)
    assert stops.sentences == 2 and stops.eos_first == 2 and stops.mean_eos_probability == pytest.approx(p)
    model.lengths.clear()
    early = stops_where_words_go_on(model, SENTENCES, VOCAB, 3, window=1)  # one token read: index 0 < at
    assert model.lengths == [1] and early.sentences == 1 and early.eos_first == 0
    with pytest.raises(ValueError, match="no sentence has a word at target position 4"):
        stops_where_words_go_on(model, SENTENCES, VOCAB, 4)


class LastTokens(nn.Module):
    """Logits from the current token and the one before (none at the start): records what it reads."""

    def __init__(self, vocab_size):
        super().__init__()
        self.now, self.before, self.lengths = nn.Embedding(vocab_size, vocab_size), \
            nn.Embedding(vocab_size, vocab_size), []

    def forward(self, ids):
        self.lengths.append(ids.shape[1])
        before = F.pad(self.before(ids[:, :-1]), (0, 0, 1, 0))  # (B, n, V): nothing before position 0
        return self.now(ids) + before


def test_a_window_feeds_the_last_tokens_only():
    """With a window, does the model never read more tokens than the window, and predict each
    later token from the tokens just before it (the same as reading the whole sentence, for a
    model that looks two tokens back and a window of three)?"""
    torch.manual_seed(0)
    model = LastTokens(len(VOCAB))
    whole = score_model(model, SENTENCES, VOCAB, cross_entropy)
    model.lengths.clear()
    windowed = score_model(model, SENTENCES, VOCAB, cross_entropy, window=3)
    assert max(model.lengths) == 3 and windowed.count == whole.count
    assert windowed.nll == pytest.approx(whole.nll, rel=1e-5)
    shorter = score_model(model, SENTENCES, VOCAB, cross_entropy, window=1)  # loses the token before
    assert shorter.nll[0] == pytest.approx(whole.nll[0]) and shorter.nll[1] != pytest.approx(whole.nll[1])


def test_score_of_no_tokens_is_an_error():
    """Does asking for the perplexity of positions that hold no token say so?"""
    score = Score(nll=(2.0, 1.0), count=(2, 1))
    assert score.perplexity(1) == pytest.approx(math.e) and score.tokens() == 3
    assert score.bits_per_token() == pytest.approx(1 / math.log(2))
    with pytest.raises(ValueError, match="no tokens at positions 2"):
        score.perplexity(2)


def test_count_baselines_by_hand():
    """Are the uniform, unigram and bigram baselines what their definitions give by hand?"""
    # train: <bos> a b <eos> | <bos> b <eos> | <bos> a a b c <eos>; predicted tokens: a 3, b 3, c 1, <eos> 3
    a, b, c = (VOCAB.stoi[w] for w in "abc")
    assert CountLM.uniform(VOCAB).score(["b"], VOCAB).perplexity() == pytest.approx(len(VOCAB))
    unigram = CountLM.unigram(SENTENCES, VOCAB)
    assert unigram.score(["b"], VOCAB).perplexity() == pytest.approx(math.exp(-math.log(0.3)))
    assert gpt.unigram_perplexity(SENTENCES, ["b"], VOCAB) == pytest.approx(1 / 0.3)
    bigram = CountLM.bigram(SENTENCES, VOCAB, weight=0.9).probs
    assert bigram[BOS, a].item() == pytest.approx(0.9 * 2 / 3 + 0.1 * 0.3)  # <bos> a: 2 of 3
    assert bigram[a, b].item() == pytest.approx(0.9 * 2 / 3 + 0.1 * 0.3)  # a b: 2 of the 3 a's
    assert bigram[c, a].item() == pytest.approx(0.1 * 0.3)  # c a: never seen
    assert bigram[EOS, a].item() == pytest.approx(0.3)  # nothing follows <eos>: the unigram
    assert torch.allclose(bigram.sum(dim=1), torch.ones(len(VOCAB), dtype=torch.float64))
    with pytest.raises(ValueError, match="never seen in training"):
        CountLM.unigram(["a"], VOCAB).score(["c"], VOCAB)


def test_best_bigram_weight_is_the_best_on_valid():
    """Is the chosen interpolation weight the one of the grid with the lowest validation perplexity?"""
    weights = (0.1, 0.5, 0.9)
    chosen = best_bigram_weight(SENTENCES, ["a b c", "c b"], VOCAB, weights)
    ppl = {w: CountLM.bigram(SENTENCES, VOCAB, w).score(["a b c", "c b"], VOCAB).perplexity()
           for w in weights}
    assert chosen == min(ppl, key=ppl.get) and len(set(ppl.values())) == 3


def test_held_out_sentences_seen_in_training_are_removed():
    """Are the 13 English test sentences that also occur in train removed (387 of 400 left), in order?"""
    train, test = gpt.load_sentences("train"), gpt.load_sentences("test")
    held_out = unseen_sentences(test, train)
    assert len(held_out) == 387 and not set(held_out) & set(train)
    assert held_out == [s for s in test if s in held_out] and positions_seen(train) == 8


def test_tables_show_every_model_the_floor_and_the_positions():
    """Do the tables print each score, the floor and how far above it, and the positions beyond training?"""
    scores = {"one": Score((4.0, 2.0, 1.0), (2, 2, 1)), "two": Score((2.0, 2.0, 0.0), (2, 2, 0))}
    floor = SHORT_FLOOR
    table = perplexity_table(scores, floor).splitlines()
    assert len(table) == 4 and table[-1].startswith("floor") and f"{floor.perplexity:.3f}" in table[-1]
    assert f"{scores['one'].bits_per_token() - floor.bits_per_token:+.3f}" in table[1]
    lines = length_table(scores, seen=2).splitlines()
    assert f"{math.exp(1.5):.3f}" in lines[1] and f"{math.e:.3f}" in lines[1] and "nan" in lines[2]
    rows = position_table(scores).splitlines()
    assert rows[0].split() == ["position", "0", "1", "2"]
    assert rows[-1].split() == ["(tokens:", "one)", "2", "2", "1"]
    assert rows[2].split() == ["two", f"{math.e:.2f}", f"{math.e:.2f}", "-"]
    ax = perplexity_by_position(scores, seen=2)
    assert [list(line.get_xdata()) for line in ax.lines[:2]] == [[0, 1, 2], [0, 1]]
    assert list(ax.lines[0].get_ydata()) == pytest.approx([math.e ** 2, math.e, math.e])
    assert ax.lines[2].get_xdata()[0] == 1.5
    matplotlib.pyplot.close("all")


# ---------------------------------------------------------------- the floor: the data's own entropy


def load_grammar():
    """data/make_corpus.py as a module (it is a script, not part of the course package)."""
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "data" / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_corpus", module)  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


GRAMMAR = load_grammar()


def fresh_sentences(n, min_words, max_words, seed):
    """``n`` English sentences drawn from the grammar (no deduplication), French lengths in range."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        french, english = GRAMMAR.sentence(rng)
        if min_words <= len(french.split()) <= max_words:
            out.append(english)
    return out


def sampled_entropy(model, sentences):
    """Monte-Carlo estimate of the entropy per sentence and per token, with standard errors."""
    nll = torch.tensor([-model.log_prob(s) for s in sentences], dtype=torch.float64)
    tokens = torch.tensor([len(tokenize(s)) + 1 for s in sentences], dtype=torch.float64)  # words, <eos>
    se = lambda x: (x.std() / math.sqrt(len(x))).item()  # noqa: E731
    return nll.mean().item(), se(nll), tokens.mean().item(), se(tokens)


def test_floor_constants_are_what_the_grammar_gives():
    """Are SHORT_FLOOR and LONG_FLOOR the exact entropies of make_corpus.py's grammar, recomputed?"""
    short, long = (1, GRAMMAR.LONG_FROM - 1), (GRAMMAR.LONG_FROM, 9)
    for (low, high), floor in ((short, SHORT_FLOOR), (long, LONG_FLOOR)):
        assert astuple(grammar_floor(GRAMMAR, low, high)) == pytest.approx(astuple(floor), rel=1e-12)
    everything = GrammarModel(GRAMMAR, 1, 99)
    assert everything.z == pytest.approx(1.0, abs=1e-12)  # every sentence of the grammar is in range


def small_grammar():
    """make_corpus.py with one noun of each kind (every pronoun, adjective and verb kept)."""
    small = type(GRAMMAR)("small_grammar")
    one_each = [next(n for n in GRAMMAR.NOUNS if n.kind == kind) for kind in GRAMMAR.ALL_KINDS]
    small.__dict__.update({**GRAMMAR.__dict__, "NOUNS": one_each})
    return small


@pytest.mark.parametrize("low, high", [(1, 7), (6, 7), (8, 9), (1, 99)])
def test_floor_equals_the_entropy_of_every_sentence_listed(low, high):
    """On a small grammar, is the grouped computation the entropy of the list of every English
    sentence (subject, verb form, object: merged when equal, kept when the French length is in range)?"""
    g = small_grammar()
    model, sentences = GrammarModel(g, low, high), {}
    for (subject, n_subject, third), p_subject in model.subjects.items():
        for verb in g.VERBS:
            form = verb.en_3sg if third else verb.en
            for (obj, n_obj, _), p_obj in model.objects[verb.objects].items():
                if low <= n_subject + 1 + n_obj <= high:
                    key = f"{subject} {form} {obj}"
                    sentences[key] = sentences.get(key, 0.0) + p_subject * p_obj / len(g.VERBS)
    z = math.fsum(sentences.values())
    entropy = -math.fsum(p / z * math.log(p / z) for p in sentences.values())
    tokens = math.fsum(p / z * (len(s.split()) + 1) for s, p in sentences.items())
    floor = model.floor
    assert (floor.nats_per_sentence, floor.tokens_per_sentence) == pytest.approx((entropy, tokens), rel=1e-9)
    assert [model.log_prob(s) for s in list(sentences)[::50]] == pytest.approx(
        [math.log(p / z) for p in list(sentences.values())[::50]], rel=1e-9)


@pytest.mark.parametrize("low, high, n", [(1, 7, 20_000), (8, 9, 4_000)])
def test_floor_agrees_with_sampled_sentences(low, high, n):
    """Is the exact entropy, per sentence and per token, within 4 standard errors of its Monte-Carlo
    estimate from sentences sampled by make_corpus.py itself (each of probability > 0)?"""
    model = GrammarModel(GRAMMAR, low, high)
    floor = model.floor
    nll, nll_se, tokens, tokens_se = sampled_entropy(model, fresh_sentences(n, low, high, seed=7))
    assert math.isfinite(nll)
    assert abs(nll - floor.nats_per_sentence) < 4 * nll_se
    assert abs(tokens - floor.tokens_per_sentence) < 4 * tokens_se


def chi_square(counts, expected):
    """Pearson's statistic over the categories expected at least 20 times (the rest pooled), and its
    degrees of freedom."""
    big = [key for key in expected if expected[key] >= 20]
    observed = [counts.get(key, 0) for key in big]
    wanted = [expected[key] for key in big]
    rest = sum(expected.values()) - sum(wanted)
    if rest >= 1:
        observed.append(sum(counts.values()) - sum(observed))
        wanted.append(rest)
    return sum((o - e) ** 2 / e for o, e in zip(observed, wanted)), len(wanted) - 1


def test_phrase_probabilities_match_sampled_frequencies():
    """Do the subjects and the objects of each verb occur, in 20,000 sentences sampled by
    make_corpus.py, as often as the grammar model's probabilities say (Pearson's chi-square
    below df + 6 sqrt(2 df))?"""
    model = GrammarModel(GRAMMAR, 1, 99)
    rng, counts = random.Random(5), {}
    for _ in range(20_000):
        words = GRAMMAR.sentence(rng)[1].split()
        at = next(i for i, w in enumerate(words) if w in model.verbs)
        kinds = model.verbs[words[at]][0].objects
        for table, phrase in ((None, words[:at]), (kinds, words[at + 1:])):
            counts.setdefault(table, {}).setdefault(" ".join(phrase), 0)
            counts[table][" ".join(phrase)] += 1
    tables = {None: model.subjects, **model.objects}
    for table, phrases in tables.items():
        drawn = sum(counts[table].values())
        expected = {}
        for (english, _, _), p in phrases.items():
            expected[english] = expected.get(english, 0.0) + p * drawn
        statistic, df = chi_square(counts[table], expected)
        assert statistic < df + 6 * math.sqrt(2 * df), (table, statistic, df)


def test_the_sampling_check_catches_a_wrong_grammar():
    """Would the Monte-Carlo check reject the floor of a grammar that is slightly off (colours
    with probability 0.35 instead of 0.45), so that it can fail?"""
    wrong = type(GRAMMAR)("wrong_grammar")
    wrong.__dict__.update({**GRAMMAR.__dict__, "P_COLOUR_ADJ": 0.35})
    floor = grammar_floor(wrong, 1, 7)
    nll, nll_se, _, _ = sampled_entropy(GrammarModel(wrong, 1, 7), fresh_sentences(20_000, 1, 7, seed=7))
    assert abs(nll - floor.nats_per_sentence) > 4 * nll_se


def test_no_baseline_beats_the_floor_on_fresh_sentences():
    """On 20,000 fresh sentences of the grammar, is every count baseline trained on train above
    the floor, and the grammar itself at it?"""
    train = gpt.load_sentences("train")
    vocab = Vocab.from_sentences(train)
    fresh = fresh_sentences(20_000, 1, 7, seed=11)
    known = [s for s in fresh if all(w in vocab.stoi for w in s.split())]
    assert len(known) == len(fresh)  # every word of the grammar occurs in train
    bigram = CountLM.bigram(train, vocab, best_bigram_weight(train, gpt.load_sentences("valid"), vocab))
    for baseline in (CountLM.uniform(vocab), CountLM.unigram(train, vocab), bigram):
        assert baseline.score(fresh, vocab).perplexity() > SHORT_FLOOR.perplexity
    model = GrammarModel(GRAMMAR, 1, 7)
    itself = math.exp(-sum(model.log_prob(s) for s in fresh) / sum(len(s.split()) + 1 for s in fresh))
    assert itself == pytest.approx(SHORT_FLOOR.perplexity, rel=0.01)


@pytest.mark.slow
def test_a_trained_gpt_lands_between_the_bigram_and_the_floor():
    """Trained with the solution's GPT, lm_loss and warmup_cosine_lr, is the GPT's perplexity on
    fresh grammar sentences below the bigram's and above the floor?"""
    from samples import load_solution_namespace

    ns = load_solution_namespace("10.7-gpt")
    train = gpt.load_sentences("train")
    vocab = Vocab.from_sentences(train)
    torch.manual_seed(0)
    model = gpt.gpt2_init(ns["GPT"](len(vocab), d_model=64, num_heads=4, d_ff=256, num_layers=2, max_len=16,
                                    pad_id=PAD))
    steps = 300
    lr_at = lambda step: ns["warmup_cosine_lr"](step, 3e-3, 30, steps, 3e-4)  # noqa: E731
    gpt.train_lm(model, train, vocab, ns["lm_loss"], lr_at, steps, step=ns["lm_step"], progress=False)
    fresh = fresh_sentences(5_000, 1, 7, seed=13)
    model_ppl = score_model(model, fresh, vocab, ns["lm_loss"]).perplexity()
    bigram = CountLM.bigram(train, vocab, 0.998).score(fresh, vocab).perplexity()
    print(f"fresh sentences: GPT {model_ppl:.3f}, bigram {bigram:.3f}, floor {SHORT_FLOOR.perplexity:.3f}")
    assert SHORT_FLOOR.perplexity < model_ppl < bigram
