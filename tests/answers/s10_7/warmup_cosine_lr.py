"""warmup_cosine_lr: right answers written differently, and planted bugs."""

import math

import numpy as np
import torch

from course.visible.s10_7.warmup_cosine_lr import (
    COSINE_OVER_TOTAL,
    COSINE_TO_ZERO,
    DECAY_ONE_SHORT,
    NO_DECAY_DIVIDES,
    NO_FLOOR,
    WARMUP_FROM_ZERO,
    WARMUP_ONE_LONG,
    WARMUP_OVER_ONE_MORE,
)
from tests.answers import bug, right

EXERCISE = "warmup_cosine_lr"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = "numbers in, a number out: the reference's formula is arithmetic"


def lr_clamped(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The decay's progress clamped to 1: the floor falls out of the cosine."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps * peak_lr
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps)) if total_steps > warmup_steps \
        else 1.0
    return min_lr + (peak_lr - min_lr) * (math.cos(math.pi * progress) + 1) / 2


def lr_clamped_max_1(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The decay's length taken as at least 1: at step total_steps = warmup_steps the progress is 0, the
    peak, where the floor is due."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps * peak_lr
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + (peak_lr - min_lr) * (math.cos(math.pi * progress) + 1) / 2


def lr_numpy(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """numpy's cosine: a numpy float, which LambdaLR takes too."""
    if step >= total_steps:
        return float(min_lr)
    if step >= warmup_steps:
        t = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + 0.5 * (peak_lr - min_lr) * (1 + np.cos(np.pi * t))
    return peak_lr * (step + 1) / warmup_steps


def lr_tensor(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    return torch.tensor(lr_clamped(step, peak_lr, warmup_steps, total_steps, min_lr))


def lr_warmup_ratio(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """min(1, ...) divides by warmup_steps even when there is no warm-up."""
    warm = min(1.0, (step + 1) / warmup_steps)
    if warm < 1.0:
        return peak_lr * warm
    return lr_clamped(step, peak_lr, warmup_steps, total_steps, min_lr)


def _cosine(step, peak_lr, start, span, low):
    return low + (peak_lr - low) * 0.5 * (1 + math.cos(math.pi * (step - start) / span))


def warmup_from_zero(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    return min_lr if step >= total_steps else _cosine(step, peak_lr, warmup_steps, total_steps - warmup_steps,
                                                      min_lr)


def warmup_one_long(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step <= warmup_steps and warmup_steps > 0:
        return peak_lr * (step + 1) / warmup_steps
    return min_lr if step >= total_steps else _cosine(step, peak_lr, warmup_steps, total_steps - warmup_steps,
                                                      min_lr)


def cosine_to_zero(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    return peak_lr * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (total_steps - warmup_steps)))


def cosine_over_total(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    return min_lr if step >= total_steps else _cosine(step, peak_lr, warmup_steps, total_steps, min_lr)


def decay_one_short(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps - 1:
        return min_lr
    return _cosine(step, peak_lr, warmup_steps, total_steps - warmup_steps - 1, min_lr)


def no_floor(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    return _cosine(step, peak_lr, warmup_steps, total_steps - warmup_steps, min_lr)


def min_lr_as_given(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """min_lr returned as it came: an int when it was given as one (LambdaLR multiplies an int too)."""
    if step >= total_steps:
        return min_lr
    return lr_clamped(step, peak_lr, warmup_steps, total_steps, min_lr)


def get_lr(it, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """Karpathy's build-nanogpt get_lr as published (its globals made arguments): min_lr returned as
    given, the int 0 too, past the last step; at step max_steps it divides by max_steps - warmup_steps,
    0 / 0 when the warm-up fills the schedule (LambdaLR asks for that step after the last update)."""
    # 1) linear warmup for warmup_iters steps
    if it < warmup_steps:
        return max_lr * (it+1) / warmup_steps
    # 2) if it > lr_decay_iters, return min learning rate
    if it > max_steps:
        return min_lr
    # 3) in between, use cosine decay down to min learning rate
    decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) # coeff starts at 1 and goes to 0
    return min_lr + coeff * (max_lr - min_lr)


def get_lr_floor_from_total(it, max_lr, warmup_steps, max_steps, min_lr=0.0):
    """build-nanogpt's get_lr with the floor from max_steps on (it >= max_steps): right everywhere."""
    if it >= max_steps:
        return min_lr
    return get_lr(it, max_lr, warmup_steps, max_steps, min_lr)


def nanogpt_get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr=0.0):
    """nanoGPT's get_lr (train.py), as published: the warm-up divided by warmup_iters + 1."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def hugging_face_cosine(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """transformers' get_cosine_schedule_with_warmup (its lr_lambda times peak_lr), min_lr as the floor of
    the cosine: a warm-up from 0 and a cosine that rises again after total_steps, two mistakes."""
    if step < warmup_steps:
        return peak_lr * step / max(1, warmup_steps)
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + (peak_lr - min_lr) * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def progress_first(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The decay's progress computed before the warm-up test: 0 / 0 when warmup_steps == total_steps."""
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    return min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))


def answers(solution):
    return [
        right("solution", solution["warmup_cosine_lr"]),
        right("lr_clamped", lr_clamped),
        right("lr_numpy", lr_numpy),
        right("min_lr returned as given (an int)", min_lr_as_given),
        right("build-nanogpt's get_lr, the floor from max_steps on", get_lr_floor_from_total),
        bug("warm-up from 0", warmup_from_zero, hidden="differs", mistake=WARMUP_FROM_ZERO),
        bug("warm-up one step long", warmup_one_long, mistake=WARMUP_ONE_LONG),
        bug("nanoGPT's get_lr (warm-up over warmup_iters + 1)", nanogpt_get_lr, mistake=WARMUP_OVER_ONE_MORE),
        bug("Hugging Face's cosine with warm-up (from 0, no floor)", hugging_face_cosine,
            hidden="first wrong step", mistake=WARMUP_FROM_ZERO),
        bug("cosine to 0", cosine_to_zero, mistake=COSINE_TO_ZERO),
        bug("cosine over total_steps", cosine_over_total, mistake=COSINE_OVER_TOTAL),
        bug("decay ends a step early", decay_one_short, mistake=DECAY_ONE_SHORT),
        bug("no floor after total_steps", no_floor, mistake=NO_FLOOR),
        bug("progress over max(1, decay length): the peak at step total = warm-up", lr_clamped_max_1,
            hidden="differs"),
        bug("returns a tensor", lr_tensor, hidden=r"a real number \(int or float\), not a tensor"),
        bug("decay's progress before the warm-up test", progress_first, hidden="ZeroDivisionError",
            mistake=NO_DECAY_DIVIDES),
        bug("build-nanogpt's get_lr as published (0 / 0 at step total = warm-up)", get_lr,
            hidden="ZeroDivisionError", mistake=NO_DECAY_DIVIDES),
        bug("divides by warmup_steps=0", lr_warmup_ratio, hidden="ZeroDivisionError"),
    ]
