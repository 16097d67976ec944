"""Legacy tools of the visible checks not yet moved to :mod:`course.checking` (goes away with them).

Instant checks that run right after each exercise (the visible tests).

They compare with PyTorch (or, where PyTorch has nothing, with the formula) on small
examples and say what went wrong (which case, which shape, how far off, and the likely
mistake) without ever printing the expected numbers. They use the comparison engine and
the tolerances of the grading checks (:mod:`course.compare`), so they are never stricter.
The checks of each section live in ``course.visible``; this module holds their tools.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import torch

from course.checking import CheckFailure, passed, single_thread  # noqa: F401 - legacy names
from course.compare import Mistake, close, describe_difference, explain_exception, tolerance

Outputs = dict[str, torch.Tensor]


#: Legacy name of the one failure type (:class:`course.checking.CheckFailure`).
VisibleCheckFailure = CheckFailure


def check_tensor(got, what: str) -> torch.Tensor:
    """Fail with a clear message unless ``got`` is a tensor."""
    if not isinstance(got, torch.Tensor):
        raise VisibleCheckFailure(f"{what} should be a torch.Tensor, but got {type(got).__name__}.")
    return got


def check_pair(got, what: str, names: Sequence[str] = ("output", "weights")):
    """Fail unless ``got`` is a tuple of tensors such as (output, weights)."""
    if not (isinstance(got, tuple) and len(got) == len(names)):
        kind = f"a {type(got).__name__}" + (f" of length {len(got)}" if isinstance(got, tuple) else "")
        raise VisibleCheckFailure(f"{what} should return a tuple ({', '.join(names)}), but returned {kind}.")
    return tuple(check_tensor(t, f"{what}'s {n}") for t, n in zip(got, names))


def check_shape(got, expected: Sequence[int], what: str, case: str = "") -> None:
    """Fail unless ``got`` has the expected shape."""
    check_tensor(got, what)
    if tuple(got.shape) != tuple(expected):
        where = f" in case '{case}'" if case else ""
        raise VisibleCheckFailure(
            f"{what}{where} should have shape {tuple(expected)}, but has shape {tuple(got.shape)}."
        )


def check_close(got, expected: torch.Tensor, what: str, case: str = "",
                rtol: float | None = None, atol: float | None = None, *,
                against: str = "the reference",
                mistakes: Mapping[str, Mistake] | None = None) -> None:
    """Fail unless ``got`` matches ``expected``; the message gives the error, not the answer.

    The tolerance is the grading checks' for ``expected``'s dtype and device unless given.
    ``mistakes`` are known wrong variants whose ``run()`` returns a tensor: when ``got``
    matches one, the message names it and gives its hint.
    """
    check_shape(got, expected.shape, what, case)
    default_rtol, default_atol = tolerance(expected.dtype, expected.device)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    if close(got, expected, rtol, atol):
        return
    where = f" in case '{case}'" if case else ""
    message = f"{what} differs from {against}{where}: {describe_difference(got, expected)}."
    hint = likely_mistake(got, mistakes or {}, rtol, atol)
    raise VisibleCheckFailure(message + (f"\n{hint}" if hint else ""))


def likely_mistake(got: torch.Tensor, mistakes: Mapping[str, Mistake], rtol: float,
                   atol: float) -> str | None:
    """The first known mistake whose output ``got`` matches, as a sentence with its hint."""
    for mistake in mistakes.values():
        try:
            variant = mistake.run()
        except Exception:  # noqa: BLE001 - a variant that cannot run on this case says nothing
            continue
        if isinstance(variant, torch.Tensor) and close(got, variant, rtol, max(atol, 1e-6), equal_nan=True):
            return f"This looks like {mistake.description}. {mistake.hint}"
    return None


def check_outputs(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], what: str,
                  case: str, *, against: str = "the reference",
                  mistakes: Mapping[str, Mistake] | None = None) -> None:
    """Compare named outputs (and gradients, named ``grad ...``) in order.

    ``mistakes``' ``run()`` return dicts of the same names. A mistake is named when the
    learner's outputs match all of its outputs (gradients aside), not just the first that
    differs: K = X @ W_q matches "W_q and W_k swapped" only if Q = X @ W_k too.
    """
    for key, expected in want.items():
        check_shape(got[key], expected.shape, what if key == "output" else f"{what}: {key}", case)
    for key, expected in want.items():
        rtol, atol = tolerance(expected.dtype, expected.device)
        if close(got[key], expected, rtol, atol):
            continue
        label = what if key == "output" else f"{what}: {key}"
        where = f" in case '{case}'" if case else ""
        message = f"{label} differs from {against}{where}: {describe_difference(got[key], expected)}."
        hint = _matching_mistake(got, key, mistakes or {}, rtol, atol)
        raise VisibleCheckFailure(message + (f"\n{hint}" if hint else ""))


def _matching_mistake(got: Mapping[str, torch.Tensor], key: str, mistakes: Mapping[str, Mistake],
                      rtol: float, atol: float) -> str | None:
    """The first mistake whose outputs the learner's match: ``key`` and every other output."""
    for mistake in mistakes.values():
        try:
            variant = mistake.run()
        except Exception:  # noqa: BLE001 - a variant that cannot run on this case says nothing
            continue
        keys = [key] + [k for k in variant if k != key and not k.startswith("grad ") and k in got]
        if key in variant and all(close(got[k], variant[k], rtol, max(atol, 1e-6), equal_nan=True)
                                  for k in keys):
            return f"This looks like {mistake.description}. {mistake.hint}"
    return None


def run_learner(what: str, case: str, function: Callable, *args, **kwargs):
    """Call learner code; its errors become a message naming the case (NotImplementedError stays)."""
    try:
        return function(*args, **kwargs)
    except (NotImplementedError, VisibleCheckFailure):
        raise
    except Exception as error:  # noqa: BLE001 - any learner error becomes a message
        raise VisibleCheckFailure(explain_exception(what, error, f"case '{case}'")) from error


def expect_value_error(what: str, call: Callable[[], object], situation: str) -> None:
    """Fail unless ``call`` raises ValueError (the contract's error for bad arguments)."""
    try:
        call()
    except ValueError:
        return
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - learner code
        raise VisibleCheckFailure(f"{what} should raise ValueError {situation}, but raised "
                                  f"{type(error).__name__}: {error}") from None
    raise VisibleCheckFailure(f"{what} should raise ValueError {situation}, but raised nothing.")


def seeded(*shape: int, seed: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    """Reproducible normal numbers (the same on every machine)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).mul(scale).to(dtype)


def with_gradients(call: Callable[[], Sequence[torch.Tensor]], names: Sequence[str],
                   leaves: Mapping[str, torch.Tensor], seed: int) -> Outputs:
    """Outputs of ``call`` and the gradients of ``leaves`` for a seeded random loss.

    The gradients are named ``"grad <leaf>"``; a leaf that got no gradient counts as zero.
    Outputs that carry no gradient although their inputs do make the check fail: a
    ``.detach()``, ``torch.no_grad()`` or ``torch.tensor(...)`` inside the exercise.
    """
    outputs = dict(zip(names, call()))
    g = torch.Generator().manual_seed(seed + 7919)
    flowing = [t for t in outputs.values() if t.requires_grad]
    if len(flowing) < len(outputs) and all(t.is_floating_point() for t in outputs.values()):
        cut = [n for n, t in outputs.items() if not t.requires_grad]
        raise VisibleCheckFailure(
            f"{', '.join(cut)} {'carries' if len(cut) == 1 else 'carry'} no gradient although "
            "its inputs require one: training could not learn through it. Remove any "
            ".detach(), torch.no_grad() or torch.tensor(...) that rebuilds a result from numbers.")
    if flowing:
        loss = sum((t * torch.randn(t.shape, generator=g, dtype=torch.float64).to(t)).sum()
                   for t in flowing)
        loss.backward()
    grads = {f"grad {k}": (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in leaves.items()}
    return {**{k: v.detach() for k, v in outputs.items()}, **grads}


def instant(check: Callable) -> Callable:
    """Decorator for a visible check: it runs on one thread, with gradients enabled."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        with single_thread(), torch.enable_grad():
            return check(*args, **kwargs)
    return run

