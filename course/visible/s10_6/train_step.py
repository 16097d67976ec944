"""Visible check of ``train_step(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0,
max_grad_norm=1.0)``, and its known mistakes.

A setting (:class:`Setting`) builds a small stand-in translator from a seed, its optimizer (and
scheduler) and two batches; the learner's ``train_step`` runs on the two batches, one call each, and
what the calls leave behind is compared (the returned losses, the parameters, their gradients, the
optimizer's state, the learning rate, the mode the model ran in). :func:`expected` builds the same
setting again and runs the contract's step with PyTorch's ``F.cross_entropy`` and
``clip_grad_norm_``: it takes a setting, never a model or an optimizer, so nothing here can be
handed in as ``train_step``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    Outputs,
    close,
    generator,
    passed,
    randn,
    tolerance,
    visible_check,
)
from course.checking.mistakes import diagnose

ORDER = ("The contract's order: train() mode, the logits, the loss, the gradients zeroed, backward(), the "
         "clipping, the optimizer's step, then the scheduler's.")
NO_SHIFT = Mistake(
    "no_shift", "the whole target read and scored against itself (no shift: model(src, tgt) against tgt)",
    "The decoder reads tgt[:, :-1] (<bos> w1 .. wk) and predicts tgt[:, 1:] (w1 .. wk <eos>).")
SHIFT_REVERSED = Mistake(
    "shift_reversed", "the shift reversed (the decoder reads tgt[:, 1:] and is scored on tgt[:, :-1])",
    "The decoder reads tgt[:, :-1], which starts with <bos>, and predicts tgt[:, 1:], the next words.")
PADDING_COUNTED = Mistake(
    "padding_counted", "padded positions counted in the loss (no ignore_index)",
    "Tell the cross-entropy which target id to leave out (its ignore_index, the pad_id argument), so that "
    "predictions of padding are not scored.")
SMOOTHING_IGNORED = Mistake(
    "smoothing_ignored", "the label_smoothing argument ignored",
    "The cross-entropy takes the label_smoothing it is given (look at the arguments of F.cross_entropy).")
GRADIENTS_PILE_UP = Mistake(
    "gradients_pile_up", "gradients never zeroed: each call adds its gradients to those of the calls before",
    "Zero the gradients (the optimizer's or the model's zero_grad) before the backward pass: backward() adds "
    "to what .grad holds.")
NOT_CLIPPED = Mistake(
    "not_clipped", "gradients never clipped",
    "When max_grad_norm is not None, clip the norm of all the gradients together (nn.utils has the function) "
    "after the backward pass and before the optimizer's step.")
CLIPPED_AT_ONE = Mistake(
    "clipped_at_one", "gradients clipped at 1.0 whatever max_grad_norm says",
    "Clip at max_grad_norm, and not at all when it is None.")
CLIP_AFTER_STEP = Mistake(
    "clip_after_step", "gradients clipped after the optimizer's step: the step used the unclipped ones",
    ORDER)
SCHEDULER_NOT_STEPPED = Mistake(
    "scheduler_not_stepped", "the scheduler never stepped: the learning rate stays where it started",
    "When a scheduler is given, step the scheduler once, after the optimizer's step.")
SCHEDULER_BEFORE_STEP = Mistake(
    "scheduler_before_step", "the scheduler stepped before the optimizer: each update uses the next "
    "step's learning rate", ORDER)
ZEROED_AFTER_STEP = Mistake(
    "zeroed_after_step", "gradients zeroed after the optimizer's step instead of before the backward pass",
    "Zero them before the backward pass: after the call each parameter's .grad should hold this batch's "
    "(clipped) gradient, whatever the model held before.")
EVAL_MODE = Mistake(
    "eval_mode", "the model left in the mode it came in (eval(): dropout off while training)",
    "Put the model in training mode first: dropout (and anything else that trains differently) must be on.")

SCORED_ON_INPUT = Mistake(
    "scored_on_input", "the loss scored against the decoder's own input (tgt[:, :-1]) instead of the next "
    "words", "The logits at position i predict the word after the i-th: score them against the target "
    "shifted left by one position (w1 .. wk <eos>), not against what the decoder read.")
ZEROED_BEFORE_STEP = Mistake(
    "zeroed_before_step", "gradients zeroed between the backward pass and the optimizer's step: the step "
    "sees no "
    "gradient", "Zero the gradients before the backward pass, which fills them; between backward() and the "
    "step they stay as backward() left them (clipped).")
CLIPPED_BY_VALUE = Mistake(
    "clipped_by_value", "each gradient entry clipped by value (clip_grad_value_) instead of clipping the "
    "norm of all the gradients together", "The contract clips by norm: when the norm of all the gradients "
    "together exceeds max_grad_norm, every gradient is scaled by the same factor, so that their direction "
    "stays.")
LOSS_SUMMED = Mistake(
    "loss_summed", "the loss summed over the target positions (reduction='sum') instead of averaged",
    "The loss is the mean over the positions whose target is not padding (cross_entropy's default "
    "reduction): a sum grows with the batch and its lengths, and so do the steps.")
LOSS_AFTER_UPDATE = Mistake(
    "loss_after_update", "the loss computed again after the optimizer's step and returned instead of the "
    "step's own", "Return the loss of the batch as the step computed it, before the update, as a float.")
EVAL_CALLED = Mistake(
    "eval_called", "the model put in eval() mode (dropout off) while it trains",
    "train_step trains: the model computes its logits in train() mode, whatever mode it came in.")

#: Each known mistake, and the change to the contract's step that reproduces it (see :func:`expected`);
#: the first one that matches is named (EVAL_MODE before EVAL_CALLED: where both match, the model came in
#: eval() mode and was left there).
VARIANTS = {NO_SHIFT: "no shift", SHIFT_REVERSED: "shift reversed", SCORED_ON_INPUT: "scored on input",
            PADDING_COUNTED: "padding counted", SMOOTHING_IGNORED: "smoothing ignored",
            LOSS_SUMMED: "summed", GRADIENTS_PILE_UP: "never zeroed",
            ZEROED_BEFORE_STEP: "zeroed before step", NOT_CLIPPED: "not clipped",
            CLIPPED_AT_ONE: "clipped at 1", CLIPPED_BY_VALUE: "clipped by value",
            CLIP_AFTER_STEP: "clip after step", SCHEDULER_NOT_STEPPED: "scheduler not stepped",
            SCHEDULER_BEFORE_STEP: "scheduler first", ZEROED_AFTER_STEP: "zeroed after step",
            EVAL_MODE: "eval mode", EVAL_CALLED: "eval called", LOSS_AFTER_UPDATE: "loss after update"}

BOS, EOS = 1, 2
SRC_VOCAB, TGT_VOCAB, D, MAX_LEN = 7, 9, 5, 8  # the stand-in's sizes (all different)
BATCHES = ([5, 3, 4], [4, 2])  # the words of each target row, batch by batch (<bos>, <eos> and padding added)


class Setting(NamedTuple):
    """One trial: the stand-in, its optimizer and scheduler, the arguments of the two calls."""

    name: str
    optimizer: str  # "sgd" (plain), "momentum" (SGD, momentum 0.9) or "adam"
    scheduler: bool  # a LambdaLR warm-up (factor (step + 1) / 3), or none
    pad_id: int
    label_smoothing: float
    max_grad_norm: float | None
    eval_first: bool  # the model is handed in eval() mode
    seed: int
    defaults: bool = False  # call with the four positional arguments only (the defaults of the contract)


SETTINGS = [
    Setting("SGD with momentum, padded targets, the defaults (pad_id=0, no smoothing, max_grad_norm=1.0)",
            "momentum", False, 0, 0.0, 1.0, False, 0, defaults=True),
    Setting("Adam with a warm-up scheduler, label_smoothing=0.1, pad_id=3, max_grad_norm=0.5, the model "
            "handed in eval() mode", "adam", True, 3, 0.1, 0.5, True, 1),
    Setting("plain SGD, max_grad_norm=None, label_smoothing=0.2, pad_id=5", "sgd", False, 5, 0.2, None,
            False, 2),
]
DTYPES = (torch.float32, torch.float64, torch.float32)  # of the visible settings, in order


class StandIn(nn.Module):
    """A small translator with the notebook's interface, ``forward(src, tgt) -> logits (B, n_tgt, V)``:
    each target position sees the mean of the source embeddings and, by a running mean, the target
    tokens up to it; then a dropout with a fixed mask (both runs drop the same entries; off in eval
    mode) and the output layer. ``modes`` records whether each forward ran in training mode."""

    def __init__(self, pad_id: int, seed: int, dtype: torch.dtype, device):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed, self.tgt_embed = nn.Embedding(SRC_VOCAB, D), nn.Embedding(TGT_VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(MAX_LEN, D))
        self.mix, self.out = nn.Linear(D, D), nn.Linear(D, TGT_VOCAB)
        g = generator(900 + seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(randn(p.shape, g, scale=3.0 if name.startswith("out") else 1.0))
        keep = torch.rand(MAX_LEN, D, generator=g) > 0.3  # (MAX_LEN, D): True = kept
        self.register_buffer("keep", keep.double() / 0.7)  # kept entries scaled by 1 / (1 - p)
        self.to(device, dtype)
        self.modes: list[bool] = []

    def forward(self, src, tgt):
        B, n = tgt.shape  # batch, target length
        self.modes.append(self.training)
        memory = self.src_embed(src).mean(dim=1, keepdim=True)  # (B, 1, D)
        x = torch.tanh(self.mix(self.tgt_embed(tgt) + self.pos[:n] + memory))  # (B, n, D)
        counts = torch.arange(1, n + 1, device=tgt.device, dtype=x.dtype)[:, None]  # (n, 1)
        x = x.cumsum(dim=1) / counts  # position i sees the target tokens 0 .. i
        if self.training:
            x = x * self.keep[:n]  # dropout with a fixed mask
        return self.out(x)  # (B, n, V)


@dataclass
class Trial:
    """What a setting builds: the model, its optimizer and scheduler, the two batches, the options."""

    setting: Setting
    model: StandIn
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler | None
    batches: list[tuple[torch.Tensor, torch.Tensor]]

    def options(self) -> dict:
        """The keyword arguments of each call (none when the setting tests the defaults)."""
        s = self.setting
        return {} if s.defaults else {"scheduler": self.scheduler, "pad_id": s.pad_id,
                                      "label_smoothing": s.label_smoothing, "max_grad_norm": s.max_grad_norm}

    def snapshot(self, loss: float) -> Outputs:
        """What one call left behind: its loss, the parameters and their gradients, the optimizer's state
        (momentum or Adam's first moment: the gradients it was given), the learning rate, the model's mode."""
        params = list(self.model.parameters())
        state = [self.optimizer.state.get(p, {}) for p in params]
        moments = [s.get("momentum_buffer", s.get("exp_avg")) for s in state]
        dtype = params[0].dtype
        mode = self.model.modes[-1] if self.model.modes else False
        return {"loss": torch.tensor([loss], dtype=dtype, device=params[0].device),
                "parameters": torch.cat([p.detach().reshape(-1) for p in params]),
                "gradients": torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                                        for p in params]),
                "optimizer state": torch.cat([(m if m is not None else torch.zeros_like(p)).reshape(-1)
                                              for m, p in zip(moments, params)]),
                "learning rate": torch.tensor([self.optimizer.param_groups[0]["lr"]], dtype=dtype),
                "training mode": torch.tensor([float(mode)], dtype=dtype)}


def _batch(words: list[int], pad_id: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded ids: src (B, 4) and tgt (B, 2 + max words), rows <bos> w1 .. wk <eos> then pad_id."""
    real = [t for t in range(TGT_VOCAB) if t not in (BOS, EOS, pad_id)]
    n = 2 + max(words)
    rows = []
    for k in words:
        picks = torch.randint(0, len(real), (k,), generator=g).tolist()
        rows.append([BOS, *(real[i] for i in picks), EOS] + [pad_id] * (n - 2 - k))
    src = torch.randint(0, SRC_VOCAB, (len(words), 4), generator=g)
    return src, torch.tensor(rows)


def build(setting: Setting, dtype: torch.dtype, device) -> Trial:
    """The setting's stand-in (in eval() mode if it is handed in so), optimizer, scheduler, batches."""
    model = StandIn(setting.pad_id, setting.seed, dtype, device)
    model.train(not setting.eval_first)
    optimizer = {"sgd": lambda p: torch.optim.SGD(p, lr=0.1),
                 "momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                 "adam": lambda p: torch.optim.Adam(p, lr=0.01)}[setting.optimizer](model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: (step + 1) / 3) \
        if setting.scheduler else None
    g = generator(950 + setting.seed)
    batches = [tuple(t.to(device) for t in _batch(words, setting.pad_id, g)) for words in BATCHES]
    return Trial(setting, model, optimizer, scheduler, batches)


def learner_outputs(train_step, setting: Setting, dtype: torch.dtype, device, where: str) -> Outputs:
    """The learner's ``train_step`` (called through ``train_step(model, src, tgt, optimizer, ...)``),
    once per batch on a fresh trial: what each call left behind, stacked call after call."""
    trial = build(setting, dtype, device)
    calls = []
    for i, (src, tgt) in enumerate(trial.batches):
        seen = len(trial.model.modes)
        loss = train_step(trial.model, src.clone(), tgt.clone(), trial.optimizer, **trial.options())
        if isinstance(loss, torch.Tensor) or not isinstance(loss, (float, int)) or isinstance(loss, bool):
            raise CheckFailure(f"train_step should return the loss as a Python float (the tensor's .item()), "
                               f"but returned a {type(loss).__name__} in {where}. A tensor would keep the "
                               "whole graph of the step alive, batch after batch.")
        if len(trial.model.modes) == seen:
            raise CheckFailure(f"train_step never called the model in {where} (call {i + 1}): the "
                               "logits come from the model, run on the source and the decoder's input.")
        calls.append(trial.snapshot(float(loss)))
    return {key: torch.stack([c[key] for c in calls]) for key in calls[0]}


def expected(setting: Setting, dtype: torch.dtype, device, change: str | None = None) -> Outputs:
    """What the contract's step leaves behind on a fresh trial of ``setting`` (the same stand-in, built
    from the same seed), with PyTorch's F.cross_entropy and clip_grad_norm_; ``change`` (a value of
    :data:`VARIANTS`) makes one known mistake instead."""
    trial = build(setting, dtype, device)
    model, optimizer, scheduler, s = trial.model, trial.optimizer, trial.scheduler, trial.setting
    clip = 1.0 if change == "clipped at 1" else None if change == "not clipped" else s.max_grad_norm
    calls = []
    for src, tgt in trial.batches:
        if change == "eval called":
            model.eval()
        elif change != "eval mode":
            model.train()
        read, scored = {"no shift": (tgt, tgt), "shift reversed": (tgt[:, 1:], tgt[:, :-1]),
                        "scored on input": (tgt[:, :-1], tgt[:, :-1])}.get(change, (tgt[:, :-1], tgt[:, 1:]))
        logits = model(src, read)  # (B, n, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), scored.reshape(-1),
                               ignore_index=-100 if change == "padding counted" else s.pad_id,
                               label_smoothing=0.0 if change == "smoothing ignored" else s.label_smoothing,
                               reduction="sum" if change == "summed" else "mean")
        if change not in ("never zeroed", "zeroed after step", "zeroed before step"):
            optimizer.zero_grad()
        loss.backward()
        if change == "zeroed before step":
            optimizer.zero_grad()
        if clip is not None and change == "clipped by value":
            nn.utils.clip_grad_value_(model.parameters(), clip)
        elif clip is not None and change != "clip after step":
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        with warnings.catch_warnings():  # the scheduler stepped first: PyTorch warns, as it should
            warnings.simplefilter("ignore")
            if scheduler is not None and change == "scheduler first":
                scheduler.step()
            optimizer.step()
        if clip is not None and change == "clip after step":
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        if scheduler is not None and change not in ("scheduler not stepped", "scheduler first"):
            scheduler.step()
        if change == "zeroed after step":
            optimizer.zero_grad()
        if change == "loss after update":
            with torch.no_grad():
                logits = model(src, read)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), scored.reshape(-1),
                                       ignore_index=s.pad_id, label_smoothing=s.label_smoothing)
        calls.append(trial.snapshot(loss.item()))
    return {key: torch.stack([c[key] for c in calls]) for key in calls[0]}


OPTIMIZERS = {"sgd": "plain SGD", "momentum": "SGD with momentum", "adam": "Adam"}  # a case's kind
#: What each call leaves behind, in the order a failure looks at it (the first symptom first).
LOOKED_AT = ("training mode", "loss", "gradients", "parameters", "optimizer state", "learning rate")
#: What to check when a difference matches no known mistake.
WHERE_TO_LOOK = {
    "training mode": "The model computes its logits in train() mode.",
    "loss": "Check what the decoder reads, what its logits are scored against, ignore_index, "
            "label_smoothing and the reduction (the mean).",
    "gradients": "Check the order: the gradients zeroed before the backward pass, clipped (by norm, at "
                 "max_grad_norm) after it and before the optimizer's step.",
    "parameters": "Check the clipping, and the order of the backward pass, the clipping and the "
                  "optimizer's step.",
    "optimizer state": "The optimizer's state is built from the gradients its step sees: check the "
                       "zeroing and the clipping before it.",
    "learning rate": "When a scheduler is given, step the scheduler once, after the optimizer's step.",
}


def what_differs(key: str, got: torch.Tensor, want: torch.Tensor) -> str:
    """One call's output ``key`` said in words, the learner's against the contract's step's."""
    if key == "loss":
        return f"it returned a loss of {got.item():.6g} where the contract's step returns {want.item():.6g}"
    if key == "learning rate":
        return (f"the learning rate after it is {got.item():.6g}, where the contract's step leaves "
                f"{want.item():.6g}")
    if key == "training mode":
        return (f"the model computed its logits in {'train' if got.item() else 'eval'}() mode, the "
                f"contract's step in {'train' if want.item() else 'eval'}() mode")
    gap = (got.double() - want.double()).abs().nan_to_num(nan=float("inf")).max().item()
    what = {"gradients": "the gradients it left in the parameters' .grad",
            "parameters": "the parameters after its optimizer step",
            "optimizer state": "the optimizer's state after it (the momentum, or Adam's first moment)"}[key]
    return f"{what} differ from the contract's step's by up to {gap:.3g}"


def trial_case(setting: Setting, seed: int, dtype: torch.dtype) -> Case:
    """A case of ``setting`` in ``dtype``; its kind is the optimizer's."""
    return Case(setting.name, seed, {"setting": setting}, dtype, kind=OPTIMIZERS[setting.optimizer])


class TrainStep(Exercise):
    name = "train_step"
    reference_name = "the contract's step (F.cross_entropy, clip_grad_norm_) on the same model"
    mistakes = {m: (lambda case, device, change=change: expected(case.params["setting"], case.dtype, device,
                                                                 change)) for m, change in VARIANTS.items()}
    visible_cases = [trial_case(s, 760 + i, dtype) for i, (s, dtype) in enumerate(zip(SETTINGS, DTYPES))]

    def run(self, impl, case, device):
        def call(*args, **kwargs):
            return self.call(case, impl, *args, **kwargs)

        return learner_outputs(call, case.params["setting"], case.dtype, device, str(case))

    def reference(self, case, device):
        return expected(case.params["setting"], case.dtype, device)

    def evaluate(self, case, got, device):
        """Call by call, the first of :data:`LOOKED_AT` that differs, said in words, with the known
        mistake it matches (or where to look)."""
        want = self.expected(case, device)
        variants = {m: (lambda run=run: run(case, device)) for m, run in self.mistakes.items()}
        for call in range(want["loss"].shape[0]):
            for key in LOOKED_AT:
                tol = tolerance(want[key].dtype, device)
                if close(got[key][call], want[key][call], *tol):
                    continue
                mistake = diagnose(got, key, variants, *tol, reference=want)
                before = " (after a first call that was right)" if call else ""
                message = (f"train_step, call {call + 1} of {want['loss'].shape[0]}{before} in {case}: "
                           f"{what_differs(key, got[key][call], want[key][call])}.")
                extra = mistake.sentence() if mistake else WHERE_TO_LOOK[key]
                raise CheckFailure(f"{message}\n{extra}", mistake)


@visible_check
def check_train_step(train_step) -> None:
    """Two calls per setting against the contract's step on the same stand-in: losses, parameters,
    gradients, optimizer state, learning rate, mode; no tensor made without a device."""
    TrainStep().run_cases(train_step)
    passed("train_step shifts the target, ignores padding, smooths the labels, zeroes, clips and steps in "
           "the contract's order, and returns the loss as a float.")
