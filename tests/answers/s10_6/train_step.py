"""train_step: right answers written differently, and planted bugs (one per usual mistake)."""

import torch
import torch.nn.functional as F
from torch import nn

from course.visible.s10_6.train_step import (
    CLIP_AFTER_STEP,
    CLIPPED_AT_ONE,
    CLIPPED_BY_VALUE,
    EVAL_CALLED,
    EVAL_MODE,
    GRADIENTS_PILE_UP,
    LOSS_AFTER_UPDATE,
    LOSS_SUMMED,
    NO_SHIFT,
    NOT_CLIPPED,
    PADDING_COUNTED,
    SCHEDULER_BEFORE_STEP,
    SCHEDULER_NOT_STEPPED,
    SCORED_ON_INPUT,
    SHIFT_REVERSED,
    SMOOTHING_IGNORED,
    ZEROED_AFTER_STEP,
    ZEROED_BEFORE_STEP,
)
from tests.answers import bug, right

EXERCISE = "train_step"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = 'the reference step is F.cross_entropy and clip_grad_norm_, which train_step may call'


def _loss(logits, targets, pad_id, e, reduction="mean"):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=pad_id,
                           label_smoothing=e, reduction=reduction)


def step_by_hand(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0,
                 max_grad_norm=1.0):
    """A right answer: the loss from log-probabilities and a mask, gradients zeroed in place, the
    clipping done by hand (PyTorch's formula: one factor for every gradient)."""
    model.train()
    decoder_in, targets = tgt.narrow(1, 0, tgt.shape[1] - 1), tgt.narrow(1, 1, tgt.shape[1] - 1)
    log_probs = (logits := model(src, decoder_in)) - logits.logsumexp(dim=-1, keepdim=True)  # (B, n, V)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, n)
    per = (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(dim=-1)
    keep = targets != pad_id
    loss = per[keep].mean()
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()
    loss.backward()
    if max_grad_norm is not None:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        factor = (max_grad_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(factor)
    optimizer.step()
    if scheduler:
        scheduler.step()
    return float(loss)


def step_with_module(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0,
                     max_grad_norm=1.0):
    """A right answer: nn.CrossEntropyLoss, model.zero_grad(set_to_none=True), the loss read before the
    update with .detach().item()."""
    model.train(True)
    criterion = nn.CrossEntropyLoss(ignore_index=pad_id, label_smoothing=label_smoothing)
    logits = model(src, tgt[:, :-1])
    loss = criterion(logits.flatten(0, 1), tgt[:, 1:].flatten())
    value = loss.detach().item()
    model.zero_grad(set_to_none=True)
    loss.backward()
    if max_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return value


def zero_after_step(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0,
                    max_grad_norm=1.0):
    """nanoGPT's order, the gradients set to None after the step: None before the next backward too,
    but the contract's order leaves this batch's clipped gradients in .grad after the call."""
    model.train()
    logits = model(src, tgt[:, :-1])
    loss = _loss(logits, tgt[:, 1:], pad_id, label_smoothing)
    loss.backward()
    if max_grad_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def _step(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0, max_grad_norm=1.0, *,
          read=None, scored=None, ignore=None, smoothing=True, zero=True, clip="before", train=True,
          schedule="after", returned="loss", reduction="mean"):
    """The contract's step with one thing done wrong (the keywords after *)."""
    if train == "eval":
        model.eval()
    elif train:
        model.train()
    logits = model(src, tgt[:, :-1] if read is None else read(tgt))
    loss = _loss(logits, tgt[:, 1:] if scored is None else scored(tgt), pad_id if ignore is None else ignore,
                 label_smoothing if smoothing else 0.0, reduction)
    if zero is True:
        optimizer.zero_grad()
    loss.backward()
    if zero == "between":
        optimizer.zero_grad()
    norm = max_grad_norm if clip != "at 1" else 1.0
    if norm is not None and clip in ("before", "at 1"):
        nn.utils.clip_grad_norm_(model.parameters(), norm)
    if norm is not None and clip == "value":
        nn.utils.clip_grad_value_(model.parameters(), norm)
    if scheduler is not None and schedule == "before":
        scheduler.step()
    optimizer.step()
    if norm is not None and clip == "after":
        nn.utils.clip_grad_norm_(model.parameters(), norm)
    if scheduler is not None and schedule == "after":
        scheduler.step()
    if returned == "tensor":
        return loss
    if returned == "after the update":
        with torch.no_grad():
            return _loss(model(src, tgt[:, :-1]), tgt[:, 1:], pad_id, label_smoothing).item()
    return loss.item()


def planted(**change):
    return lambda *args, **kwargs: _step(*args, **kwargs, **change)


def fixed_device_weights(model, src, tgt, optimizer, scheduler=None, pad_id=0, label_smoothing=0.0,
                         max_grad_norm=1.0):
    """Class weights made with torch.ones(V): on the CPU whatever the model's device."""
    model.train()
    logits = model(src, tgt[:, :-1])
    weight = torch.ones(logits.shape[-1], dtype=logits.dtype)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), weight=weight, ignore_index=pad_id,
                           label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    if max_grad_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def answers(solution):
    return [
        right("solution", solution["train_step"]),
        right("loss and clipping by hand", step_by_hand),
        right("nn.CrossEntropyLoss, model.zero_grad", step_with_module),
        bug("no shift", planted(read=lambda t: t, scored=lambda t: t), mistake=NO_SHIFT),
        bug("shift reversed", planted(read=lambda t: t[:, 1:], scored=lambda t: t[:, :-1]),
            mistake=SHIFT_REVERSED),
        bug("padding counted", planted(ignore=-100), mistake=PADDING_COUNTED),
        bug("label smoothing ignored", planted(smoothing=False), mistake=SMOOTHING_IGNORED),
        bug("gradients never zeroed", planted(zero=False), mistake=GRADIENTS_PILE_UP),
        bug("never clipped", planted(clip="never"), mistake=NOT_CLIPPED),
        bug("clipped at 1.0 always", planted(clip="at 1"), mistake=CLIPPED_AT_ONE),
        bug("clipped after the step", planted(clip="after"), mistake=CLIP_AFTER_STEP),
        bug("scheduler not stepped", planted(schedule="never"), mistake=SCHEDULER_NOT_STEPPED),
        bug("scheduler stepped before the optimizer", planted(schedule="before"),
            mistake=SCHEDULER_BEFORE_STEP),
        bug("gradients set to None after the step (nanoGPT's order)", zero_after_step,
            mistake=ZEROED_AFTER_STEP),
        bug("model left in eval mode", planted(train=False), mistake=EVAL_MODE),
        bug("scored on tgt[:, :-1]", planted(scored=lambda t: t[:, :-1]),
            hidden=r"call 1 of 2.*returned a loss", mistake=SCORED_ON_INPUT),
        bug("zero_grad between backward() and step()", planted(zero="between"),
            hidden=r"call 1 of 2.*gradients it left", mistake=ZEROED_BEFORE_STEP),
        bug("clip_grad_value_", planted(clip="value"), hidden=r"call 1 of 2.*gradients it left",
            mistake=CLIPPED_BY_VALUE),
        bug("reduction='sum'", planted(reduction="sum"), hidden=r"call 1 of 2.*returned a loss",
            mistake=LOSS_SUMMED),
        bug("model.eval()", planted(train="eval"), hidden=r"call 1 of 2.*in eval\(\) mode",
            mistake=EVAL_CALLED),
        bug("pad_id 0 hard-coded", planted(ignore=0), hidden=r"(?s)returned a loss.*ignore_index"),
        bug("returns the loss tensor", planted(returned="tensor"), hidden="Python float"),
        bug("returns the loss after the update", planted(returned="after the update"),
            hidden=r"call 1 of 2.*returned a loss", mistake=LOSS_AFTER_UPDATE),
        bug("class weights on a fixed device", fixed_device_weights, hidden="without a device"),
    ]
