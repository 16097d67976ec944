"""Seeded inputs, outputs with their gradients, and comparing named outputs with a reference."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch

from course.checking.compare import close, describe_difference, tolerance
from course.checking.failure import CheckFailure
from course.checking.learner import expect_shape
from course.checking.mistakes import Variants, diagnose

Outputs = dict[str, torch.Tensor]


def generator(seed: int) -> torch.Generator:
    """A CPU generator: the same numbers on every machine, whatever the device."""
    return torch.Generator().manual_seed(seed)


def randn(shape: Sequence[int], g: torch.Generator, dtype: torch.dtype = torch.float64,
          device: torch.device | str = "cpu", scale: float = 1.0) -> torch.Tensor:
    """Seeded normal numbers made on the CPU in float64, then moved to ``device`` and ``dtype``."""
    return (torch.randn(tuple(shape), generator=g, dtype=torch.float64) * scale).to(device, dtype)  # () too


def seeded(*shape: int, seed: int, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    """Reproducible normal numbers (the same on every machine)."""
    return randn(shape, generator(seed), dtype, "cpu", scale)


def with_gradients(call: Callable[[], Sequence[torch.Tensor]], names: Sequence[str],
                   leaves: Mapping[str, torch.Tensor], seed: int) -> Outputs:
    """Outputs of ``call`` and the gradients of ``leaves`` for a seeded random loss.

    The gradients are named ``"grad <leaf>"``; a leaf that got no gradient counts as zero.
    Outputs that carry no gradient although their inputs do make the check fail: a
    ``.detach()``, ``torch.no_grad()`` or ``torch.tensor(...)`` inside the exercise.
    """
    outputs = dict(zip(names, call()))
    flowing = [t for t in outputs.values() if t.requires_grad]
    if len(flowing) < len(outputs) and all(t.is_floating_point() for t in outputs.values()) \
            and any(leaf.requires_grad for leaf in leaves.values()):
        cut = [n for n, t in outputs.items() if not t.requires_grad]
        raise CheckFailure(
            f"{', '.join(cut)} {'carries' if len(cut) == 1 else 'carry'} no gradient although "
            f"{'its' if len(cut) == 1 else 'their'} inputs require one: training could not learn through "
            f"{'it' if len(cut) == 1 else 'them'}. Remove any "
            ".detach(), torch.no_grad() or torch.tensor(...) that rebuilds a result from numbers.")
    if flowing:
        g = generator(seed + 7919)
        loss = sum((t * randn(t.shape, g, t.dtype, t.device)).sum() for t in flowing)
        loss.backward()
    grads = {f"grad {k}": (v.grad if v.grad is not None else torch.zeros_like(v)) for k, v in leaves.items()}
    return {**{k: v.detach() for k, v in outputs.items()}, **grads}


def compare_outputs(got: Mapping[str, torch.Tensor], want: Mapping[str, torch.Tensor], what: str,
                    where: str = "", *, against: str | Mapping[str, str] = "the PyTorch reference",
                    variants: Variants | None = None, device: torch.device | str | None = None,
                    atol: float | None = None, rtol: float = 1e-6,
                    hint: Callable[[str, torch.Tensor], str | None] | None = None) -> None:
    """Fail on the first output (or gradient, ``"grad ..."``) of ``got`` that differs from ``want``.

    Shapes are checked first, then values with the tolerance of each output's dtype and of
    ``device`` (the outputs' own by default), or within ``atol + rtol·|want|`` when ``atol`` is
    given (a float32 angle's error grows with the position: :func:`~course.checking.angle_tolerance`).
    ``against`` says what an output is compared with (one text, or one per output). The failure
    names the first of ``variants`` (known mistakes on this case) whose outputs the learner's
    match, and not the reference's; else it adds ``hint(key, got[key])`` if that says anything.
    """
    label = {key: what if key == "output" else f"{what}: {key}" for key in want}
    for key, expected in want.items():
        if key not in got:
            raise CheckFailure(f"{what}: no {key} was produced{' in ' + where if where else ''}.")
        expect_shape(got[key], expected.shape, label[key], where)
    for key, expected in want.items():
        tol = (rtol, atol) if atol is not None else \
            tolerance(expected.dtype, device if device is not None else expected.device)
        if close(got[key], expected, *tol):
            continue
        mistake = diagnose(got, key, variants or {}, *tol, reference=want)
        reference = against if isinstance(against, str) else against.get(key, "the reference")
        message = (f"{label[key]} differs from {reference}{' in ' + where if where else ''}: "
                   f"{describe_difference(got[key], expected)}"
                   f"{f' (allowed {atol:.1g})' if atol is not None else ''}.")
        extra = mistake.sentence() if mistake else (hint(key, got[key]) if hint else None)
        raise CheckFailure(message + (f"\n{extra}" if extra else ""), mistake)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """One CPU thread: hundreds of tiny tensor operations run faster without thread hand-offs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
