"""Visible check of ``warmup_cosine_lr(step, peak_lr, warmup_steps, total_steps, min_lr=0.0)``."""

from __future__ import annotations

import math
import numbers

import torch

from course.checking import CheckFailure, Mistake, call_learner, compare_outputs, passed, visible_check

WARMUP_FROM_ZERO = Mistake("warmup_from_zero", "a warm-up that starts at 0 (peak_lr * step / warmup_steps)",
                           "Steps count from 0, and the first step should already move: use step + 1.")
WARMUP_ONE_LONG = Mistake("warmup_one_long", "a warm-up one step too long (step <= warmup_steps)",
                          "The warm-up is the steps 0 .. warmup_steps - 1: step < warmup_steps.")
COSINE_TO_ZERO = Mistake("cosine_to_zero", "a cosine that decays from peak_lr to 0 instead of to min_lr",
                         "Decay the difference: min_lr + (peak_lr - min_lr) * 0.5 * (1 + cos(...)).")
COSINE_OVER_TOTAL = Mistake(
    "cosine_over_total", "a cosine that spans total_steps instead of the total_steps - warmup_steps steps "
    "after the warm-up, so it never reaches min_lr",
    "Divide step - warmup_steps by total_steps - warmup_steps.")
DECAY_ONE_SHORT = Mistake(
    "decay_one_short", "a decay that reaches min_lr one step early (an off-by-one at total_steps)",
    "The cosine is at min_lr exactly at step total_steps: divide by total_steps - warmup_steps.")
NO_FLOOR = Mistake("no_floor", "a cosine that goes on after total_steps (and rises again)",
                   "From step total_steps on, return min_lr.")
CASES = [  # name, peak_lr, warmup_steps, total_steps, min_lr (None: the default), steps checked
    ("warm-up 4, total 12, min_lr 1e-5", 1e-3, 4, 12, 1e-5, 16),
    ("no warm-up (warmup_steps=0), min_lr 0.05", 0.5, 0, 6, 0.05, 9),
    ("warm-up 3, total 10, min_lr left at its default", 2e-3, 3, 10, None, 13),
]


def contract_lr(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
    """The contract's schedule, for comparing."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    return min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps)
                                                             / (total_steps - warmup_steps)))


def _variant(kind):
    def lr(step, peak_lr, warmup_steps, total_steps, min_lr=0.0):
        warm = step <= warmup_steps if kind == "one long" else step < warmup_steps
        if warm:
            return peak_lr * (step if kind == "from zero" else step + 1) / warmup_steps
        end = total_steps - 1 if kind == "one short" else total_steps
        if step >= end and kind != "no floor":
            return min_lr
        span = {"over total": total_steps, "one short": total_steps - warmup_steps - 1}.get(
            kind, total_steps - warmup_steps)
        top, bottom = (peak_lr, 0.0) if kind == "to zero" else (peak_lr, min_lr)
        return bottom + (top - bottom) * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / span))
    return lr


VARIANTS = {WARMUP_FROM_ZERO: _variant("from zero"), WARMUP_ONE_LONG: _variant("one long"),
            COSINE_TO_ZERO: _variant("to zero"), COSINE_OVER_TOTAL: _variant("over total"),
            DECAY_ONE_SHORT: _variant("one short"), NO_FLOOR: _variant("no floor")}


def schedule(lr, peak_lr, warmup_steps, total_steps, min_lr, steps, where: str = "") -> torch.Tensor:
    """``lr(step, ...)`` for steps 0 .. steps - 1 as a float64 tensor; each must be a plain number."""
    extra = () if min_lr is None else (min_lr,)
    values = []
    for step in range(steps):
        value = lr(step, peak_lr, warmup_steps, total_steps, *extra)
        if isinstance(value, (bool, torch.Tensor)) or not isinstance(value, numbers.Real):
            raise CheckFailure(
                f"warmup_cosine_lr should return a plain Python float (LambdaLR multiplies it by the base "
                f"rate), but returned a {type(value).__name__} at step {step}"
                f"{' in ' + where if where else ''}. "
                "Use math.cos and math.pi, not torch's, or return float(...).")
        values.append(float(value))
    return torch.tensor(values, dtype=torch.float64)


def learner(warmup_cosine_lr, where: str):
    return lambda *args: call_learner("warmup_cosine_lr", where, warmup_cosine_lr, *args)


def compare_schedule(warmup_cosine_lr, case) -> None:
    """The learner's schedule on every step of ``case`` against the contract's (index = step)."""
    name, peak, warmup, total, min_lr, steps = case
    where = f"case '{name}'"
    args = (peak, warmup, total, min_lr, steps)
    got = schedule(learner(warmup_cosine_lr, where), *args, where)
    variants = {m: (lambda f=f: {"output": schedule(f, *args)}) for m, f in VARIANTS.items()}
    compare_outputs({"output": got}, {"output": schedule(contract_lr, *args)}, "warmup_cosine_lr",
                    f"{where} (the index is the step)", against="the contract's formula", variants=variants)


@visible_check
def check_warmup_cosine_lr(warmup_cosine_lr) -> None:
    """Every step of three schedules against the contract's formula."""
    for case in CASES:
        compare_schedule(warmup_cosine_lr, case)
    passed("warmup_cosine_lr warms up from the first step, decays to min_lr along a cosine, and stays there; "
           "warmup_steps=0 works too.")
