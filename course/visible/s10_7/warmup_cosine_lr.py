"""``warmup_cosine_lr(step, peak_lr, warmup_steps, total_steps, min_lr=0.0)``: the exercise (schedules,
reference, known mistakes, visible cases) and its visible check.

The reference is the contract's formula evaluated over every step of a schedule at once, as a
float64 tensor (:func:`expected_schedule`): a whole schedule, not a learning rate, so that no
callable of this module is an answer to hand in.
"""

from __future__ import annotations

import math
import numbers
from functools import partial

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    compare_outputs,
    passed,
    visible_check,
)

WARMUP_FROM_ZERO = Mistake("warmup_from_zero", "a warm-up that starts at 0 (peak_lr * step / warmup_steps)",
                           "Steps count from 0, and the first step should already move: use step + 1.")
WARMUP_OVER_ONE_MORE = Mistake(
    "warmup_over_one_more", "a warm-up divided by warmup_steps + 1 (nanoGPT's get_lr): it never reaches "
    "peak_lr", "The last warm-up step, warmup_steps - 1, is at peak_lr: peak_lr * (step + 1) / warmup_steps.")
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
NO_DECAY_DIVIDES = Mistake(
    "no_decay_divides", "a division by the length of the decay, total_steps - warmup_steps, which is 0 when "
    "the warm-up fills the whole schedule (warmup_steps == total_steps, allowed)",
    "Compute the decay's progress only for the steps of the decay, warmup_steps <= step < total_steps: "
    "there its length is at least 1.")


def schedule_case(name: str, peak_lr: float, warmup_steps: int, total_steps: int, min_lr, steps: int) -> Case:
    """A case: a schedule (min_lr None: left at its default) checked on its steps 0 .. steps - 1; its
    kind: a warm-up, none, or one as long as the schedule, and min_lr given, left at its default or an
    int."""
    lowest = ("left at its default" if min_lr is None else "an int" if isinstance(min_lr, int)
              else "given")
    warm_up = ("a warm-up as long as the schedule" if warmup_steps == total_steps
               else "a warm-up" if warmup_steps else "no warm-up")
    kind = f"{warm_up}, min_lr {lowest}"
    return Case(name, 0, {"schedule": (peak_lr, warmup_steps, total_steps, min_lr, steps)}, kind=kind)


CASES = [
    schedule_case("warm-up 4, total 12, min_lr 1e-5", 1e-3, 4, 12, 1e-5, 16),
    schedule_case("no warm-up (warmup_steps=0), min_lr 0.05", 0.5, 0, 6, 0.05, 9),
    schedule_case("warm-up 3, total 10, min_lr left at its default", 2e-3, 3, 10, None, 13),
    schedule_case("min_lr given as the int 0", 1.0, 2, 5, 0, 7),
    schedule_case("no warm-up, total 7, min_lr left at its default", 0.2, 0, 7, None, 10),
    schedule_case("no warm-up, min_lr the int 0", 0.4, 0, 5, 0, 7),
    schedule_case("warm-up 5 = total 5 (no decay), min_lr 0.1, to step 7", 1.0, 5, 5, 0.1, 8),
]
#: The switches of :func:`expected_schedule` that reproduce each mistake.
SWITCHES = {WARMUP_FROM_ZERO: {"first": 0}, WARMUP_OVER_ONE_MORE: {"warm_div": 1},
            WARMUP_ONE_LONG: {"warm_extra": 1}, COSINE_TO_ZERO: {"floor": "zero"},
            COSINE_OVER_TOTAL: {"span": "total"},
            DECAY_ONE_SHORT: {"end_early": 1}, NO_FLOOR: {"clamp": False}}


def expected_schedule(peak_lr, warmup_steps, total_steps, min_lr, steps, *, first=1, warm_extra=0, warm_div=0,
                      floor="min_lr", span="after warm-up", end_early=0, clamp=True) -> torch.Tensor:
    """The contract's learning rates of steps 0 .. steps - 1 (float64, (steps,)); the keywords switch
    on known mistakes."""
    low = 0.0 if floor == "zero" or min_lr is None else float(min_lr)
    low_floor = 0.0 if min_lr is None else float(min_lr)
    s = torch.arange(steps, dtype=torch.float64)  # (steps,)
    end = total_steps - end_early
    length = total_steps if span == "total" else total_steps - warmup_steps - end_early
    progress = (s - warmup_steps) / max(length, 1)
    cosine = low + (peak_lr - low) * 0.5 * (1 + torch.cos(math.pi * progress))
    decay = torch.where(s >= end, torch.full_like(s, low_floor), cosine) if clamp else cosine
    warm = peak_lr * (s + first) / max(warmup_steps + warm_div, 1)
    return torch.where(s < warmup_steps + warm_extra, warm, decay)


def is_real(value) -> bool:
    """A real number that is not a tensor: an int or a float (numpy's included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, torch.Tensor))


def schedule(lr, peak_lr, warmup_steps, total_steps, min_lr, steps, where: str = "") -> torch.Tensor:
    """``lr(step, ...)`` for steps 0 .. steps - 1 as a float64 tensor; each must be a real number (an
    int or a float), not a tensor."""
    extra = () if min_lr is None else (min_lr,)
    values = []
    for step in range(steps):
        value = lr(step, peak_lr, warmup_steps, total_steps, *extra)
        if not is_real(value):
            raise CheckFailure(
                f"warmup_cosine_lr should return a real number (int or float), not a tensor (LambdaLR "
                f"multiplies it by the base rate), but returned {value!r}, of type {type(value).__name__}, "
                f"at step {step}{' in ' + where if where else ''}. Use math.cos and math.pi, not torch's.")
        values.append(float(value))
    return torch.tensor(values, dtype=torch.float64)


class WarmupCosineLr(Exercise):
    name = "warmup_cosine_lr"
    reference_name = "the contract's formula"
    mistakes = {m: (lambda case, device, c=c: {"output": expected_schedule(*case.params["schedule"], **c)
                                               .to(device)}) for m, c in SWITCHES.items()}
    visible_cases = CASES

    def run(self, impl, case, device):
        lr = partial(self.call, case, impl)
        try:
            return {"output": schedule(lr, *case.params["schedule"], str(case)).to(device)}
        except CheckFailure as failure:
            _, warmup_steps, total_steps, _, _ = case.params["schedule"]
            if warmup_steps == total_steps and isinstance(failure.__cause__, ZeroDivisionError):
                raise CheckFailure(f"{failure}\n{NO_DECAY_DIVIDES.sentence()}", NO_DECAY_DIVIDES) \
                    from failure.__cause__
            raise

    def reference(self, case, device):
        return {"output": expected_schedule(*case.params["schedule"]).to(device)}

    def evaluate(self, case, got, device):
        """The schedule's steps against the contract's (the index is the step)."""
        variants = {m: partial(run, case, device) for m, run in self.mistakes.items()}
        try:
            compare_outputs(got, self.expected(case, device), self.name, f"{case} (the index is the step)",
                            against=self.reference_name, variants=variants, device=device)
        except CheckFailure as failure:
            step, mistake = self.first_wrong_step(got["output"], case, device)
            if failure.mistake is not None or mistake is None:
                raise
            raise CheckFailure(f"{failure}\nIts first wrong step, {step}, is what one known mistake gives "
                               f"(another may follow). {mistake.sentence()}", mistake) from None

    def first_wrong_step(self, got: torch.Tensor, case, device):
        """The first step where ``got`` leaves the contract, and the known mistake that agrees with ``got``
        up to and at that step (None if none does): a schedule with two mistakes, as Hugging Face's."""
        want = self.expected(case, device)["output"]
        wrong = (~torch.isclose(got, want, rtol=1e-9, atol=1e-12)).nonzero()
        if not len(wrong):
            return None, None
        step = int(wrong[0])
        for mistake, run in self.mistakes.items():
            theirs = run(case, device)["output"][: step + 1]
            if torch.allclose(got[: step + 1], theirs, rtol=1e-9, atol=1e-12):
                return step, mistake
        return step, None


@visible_check
def check_warmup_cosine_lr(warmup_cosine_lr) -> None:
    """Every step of seven schedules against the contract's formula."""
    WarmupCosineLr().run_cases(warmup_cosine_lr)
    passed("warmup_cosine_lr warms up from the first step, decays to min_lr along a cosine, and stays there; "
           "warmup_steps=0, a warm-up as long as the schedule and an int min_lr work too.")
