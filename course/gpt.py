"""Data, training and figures for 10.7 (a small GPT on the English side of 10.6's corpus).

Typical use::

    train = load_sentences("train")                     # ["the black cat eats bread", ...]
    vocab = Vocab.from_sentences(train)
    batches = lm_batches(train, vocab, batch_size=64, seed=0)  # LongTensors (B, n): <bos> .. <eos> <pad>
    model = gpt2_init(model)                            # N(0, 0.02²), residual projections scaled
    history = train_lm(model, train, vocab, loss_fn, lr_at, steps=600, valid=load_sentences("valid"))
    training_curves({"GPT": history}, SHORT_FLOOR)       # loss and validation beside the learning rate

Measuring (perplexity by position, baselines, the floor) is in ``course/lm_eval.py`` and
``course/floor.py``.

A token is a word; every sentence is ``<bos> w1 .. wk <eos>``, padded at the end. The model
reads ``ids[:, :-1]`` and is scored on predicting ``ids[:, 1:]`` (``<eos>`` included, so it
learns where sentences end).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import torch
from torch import nn
from tqdm.auto import tqdm

from course.checking.outputs import single_thread as one_thread  # the notebook's name for it
from course.floor import Floor
from course.lm_eval import CountLM, LossFn, plain_log_ticks, score_model
from course.translation import EOS, Vocab, load_pairs, pad_batch


def load_sentences(split: str) -> list[str]:
    """The English sentences of one split of ``data/fr_en.tsv`` (train, valid, test or long)."""
    return [english for _, english in load_pairs(split=split)]


def lm_batches(sentences: Sequence[str], vocab: Vocab, batch_size: int = 64, shuffle: bool = True,
               seed: int | None = None) -> list[torch.Tensor]:
    """Cut ``sentences`` into padded LongTensors (B, n) of ``<bos> w1 .. wk <eos>``.

    ``shuffle`` reorders the sentences first (reproducibly when ``seed`` is given).
    """
    order = list(range(len(sentences)))
    if shuffle:
        random.Random(seed).shuffle(order)
    return [pad_batch([vocab.encode(sentences[i]) for i in order[start:start + batch_size]])
            for start in range(0, len(order), batch_size)]


#: The names of the Linear layers that end a residual branch: each block's attention output
#: (10.3's ``w_o``) and feed-forward output (10.5's ``linear2``, a SwiGLU's ``w2``).
RESIDUAL_PROJECTIONS = ("w_o", "linear2", "w2")


def gpt2_init(model: nn.Module, std: float = 0.02) -> nn.Module:
    """GPT-2's initialisation: every Linear and Embedding weight from N(0, std²), biases 0, and
    the Linear layers that end a residual branch (``RESIDUAL_PROJECTIONS``) from
    N(0, (std / sqrt(N))²), N the number of such layers (2 per block: 2 * n_layer).

    Each block adds its two branches to the residual stream; with N of them the variance of
    the stream would grow with N, so each adds 1/N of the variance instead (GPT-2 paper, 2.3).
    ``nn.Embedding`` starts at N(0, 1); with the output layer tied to it, the first logits
    would be of size sqrt(d_model) and the first loss far above log(vocabulary).
    Norms (LayerNorm, RMSNorm) keep their ones and zeros.
    """
    residual = [m for name, m in model.named_modules()
                if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in RESIDUAL_PROJECTIONS]
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=std / math.sqrt(len(residual)) if module in residual else std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    return model


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups, as minGPT's: weight decay on the weights of the Linear layers
    only; none on biases, norms or embeddings (a Linear weight tied to an embedding, as a GPT's
    output layer, counts as the embedding). nanoGPT decays every 2-D parameter instead,
    embeddings included, and exempts only biases and norms."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decayed = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)} - embeddings
    params = list(model.parameters())  # each shared parameter once
    return [{"params": [p for p in params if id(p) in decayed], "weight_decay": weight_decay},
            {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0}]


@dataclass
class History:
    """What :func:`train_lm` recorded: the loss and learning rate of every step, and the
    validation loss (nats per token) after the steps in ``val_steps`` (1-based counts)."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0  # the whole run, validation included
    eval_seconds: float = 0.0  # of which the validation passes
    positions: int = 0  # token positions the steps ran: B x (n - 1) a batch, padding included


def train_lm(model: nn.Module, sentences: Sequence[str], vocab: Vocab, loss_fn: LossFn,
             lr_at: Callable[[int], float], steps: int, batch_size: int = 64, label_smoothing: float = 0.0,
             weight_decay: float = 0.1, valid: Sequence[str] | None = None, eval_every: int = 50,
             *, step: Callable[..., float], progress: bool = True) -> History:
    """Train ``model`` (ids (B, n) -> logits (B, n, V)) to predict the next word with AdamW
    (betas 0.9, 0.95; ``param_groups``), ``steps`` calls of ``step`` on seeded shuffled batches.

    ``lr_at(step)`` is the learning rate of each step (0-based): ``LambdaLR`` multiplies the
    optimiser's base rate 1.0 by it. ``step(model, ids, optimizer, scheduler, loss_fn,
    label_smoothing)`` does one update: the notebook's own (10.6's ``train_step`` for a
    language model), so that nothing shipped here is a training step to hand in. With
    ``valid`` sentences, their loss per token (``loss_fn``, no smoothing) is recorded every
    ``eval_every`` steps and after the last.
    """
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(param_groups(model, weight_decay), lr=1.0, betas=(0.9, 0.95))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)  # lr = 1.0 * lr_at(step)
    history, epoch, start = History(), 0, time.perf_counter()
    with one_thread(), tqdm(total=steps, desc="training", disable=not progress) as bar:
        while len(history.losses) < steps:
            for ids in lm_batches(sentences, vocab, batch_size, seed=epoch):
                history.lrs.append(optimizer.param_groups[0]["lr"])
                loss = step(model, ids.to(device), optimizer, schedule, loss_fn, label_smoothing)
                history.losses.append(loss)
                history.positions += ids[:, :-1].numel()  # the step reads ids[:, :-1]
                done = len(history.losses)
                if valid is not None and (done % eval_every == 0 or done == steps):
                    eval_start = time.perf_counter()
                    history.val_steps.append(done)
                    history.val_losses.append(score_model(model, valid, vocab, loss_fn).nats_per_token())
                    history.eval_seconds += time.perf_counter() - eval_start
                bar.update()
                bar.set_postfix(loss=f"{history.losses[-1]:.3f}")
                if done == steps:
                    break
            epoch += 1
    model.eval()
    history.seconds = time.perf_counter() - start
    return history


def perplexity(model: nn.Module, sentences: Sequence[str], vocab: Vocab, loss_fn: LossFn,
               batch_size: int = 200) -> float:
    """exp of the mean cross-entropy per predicted token (words and <eos>) over ``sentences``."""
    return score_model(model, sentences, vocab, loss_fn, batch_size).perplexity()


def unigram_perplexity(train: Sequence[str], test: Sequence[str], vocab: Vocab) -> float:
    """The perplexity on ``test`` of the model that ignores context: each word (and <eos>) with
    its frequency among the predicted tokens of ``train``. A language model must beat it."""
    return CountLM.unigram(train, vocab).score(test, vocab).perplexity()


def decode(vocab: Vocab, ids: Sequence[int]) -> str:
    """Ids -> words, <bos> and padding left out, stopping after the first <eos>."""
    text = vocab.decode(ids)
    return text + (" <eos>" if EOS in [int(i) for i in ids] else " ...")


# ---------------------------------------------------------------- figures


def _running_mean(values: Sequence[float], window: int = 20) -> tuple[range, list[float]]:
    """The steps (0-based) and the mean of the last ``window`` values at each."""
    values = torch.tensor(values, dtype=torch.float64)  # (steps,)
    window = max(1, min(window, len(values)))
    return range(window - 1, len(values)), values.unfold(0, window, 1).mean(dim=1).tolist()


def training_curves(histories: Mapping[str, History] | History, floor: Floor | None = None, *,
                    title: str = "", axes=None):
    """Two panels side by side: the training loss (mean of 20 steps) and the validation loss
    of each run, with the data's ``floor`` (nats per token) if given; and the learning rates.
    ``histories``: one History, or several by name. Returns the two axes."""
    if isinstance(histories, History):
        histories = {"": histories}
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    loss_ax, lr_ax = axes
    for k, (name, history) in enumerate(histories.items()):
        colour, prefix = f"C{k}", f"{name}: " if name else ""
        loss_ax.plot(*_running_mean(history.losses), color=colour,
                     label=f"{prefix}training (mean of 20 steps)")
        if history.val_steps:
            steps = [s - 1 for s in history.val_steps]  # after step s (1-based): at index s - 1
            loss_ax.plot(steps, history.val_losses, "o--", color=colour, markersize=4,
                         label=f"{prefix}validation")
        lr_ax.plot(history.lrs, color=colour, label=name or None)
    if floor is not None:
        loss_ax.axhline(floor.nats_per_token, color="gray", linestyle=":",
                        label=f"floor: the data's entropy ({floor.nats_per_token:.2f})")
    loss_ax.set(yscale="log", xlabel="training step", ylabel="cross-entropy (nats per token)",
                title=f"{title}: loss" if title else "loss")
    plain_log_ticks(loss_ax)
    loss_ax.legend(fontsize=8)
    lr_ax.set(xlabel="training step", ylabel="learning rate", title=f"{title}: learning rate" if title
              else "learning rate")
    if any(histories):
        lr_ax.legend(fontsize=8)
    loss_ax.figure.tight_layout()
    return axes


def loss_and_schedule(history: History, *, title: str = "Training", axes=None):
    """The old name of ``training_curves(history, title=title)``, for notebooks not yet moved to it."""
    return training_curves(history, title=title, axes=axes)


def compare_losses(histories: Mapping[str, History], *, ax=None):
    """The running mean (20 steps) of several trainings' losses, on one log-scale panel."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.2))
    for name, history in histories.items():
        ax.plot(*_running_mean(history.losses), label=name)
    ax.set(yscale="log", xlabel="training step", ylabel="cross-entropy (mean of 20 steps)")
    ax.legend(fontsize=8)
    return ax


def distributions(settings: Mapping[str, torch.Tensor], words: Sequence[str], *, top: int = 12,
                  title: str = ""):
    """One bar chart per setting of the same next-word distribution (V,), side by side.

    The ``top`` most likely words of the first setting, in its order, on every panel, so
    the panels compare word for word; the title says how many words keep any mass.
    """
    first_name, first = next(iter(settings.items()))
    first = first.detach().double().cpu()
    order = first.argsort(descending=True)[:top].tolist()
    fig, axes = plt.subplots(1, len(settings), figsize=(2.6 * len(settings), 3.2), sharey=True)
    for k, (ax, (name, probs)) in enumerate(zip(axes, settings.items())):
        probs = probs.detach().double().cpu()
        ax.bar(range(len(order)), probs[order].numpy(), color="tab:blue")
        if k:  # the first setting's bars in outline, for comparison
            ax.bar(range(len(order)), first[order].numpy(), color="none", edgecolor="gray", linewidth=0.8,
                   label=first_name)
            ax.legend(fontsize=7, loc="upper right")
        kept = int((probs > 0).sum())
        ax.set_xticks(range(len(order)), [words[i] for i in order], rotation=90, fontsize=8)
        ax.set_title(f"{name}\n{kept} word{'s' if kept != 1 else ''} kept", fontsize=9)
    axes[0].set_ylabel("probability of the next word")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
