"""One engine for both sides: an exercise's cases, run, compared with the reference, diagnosed.

An exercise is defined once, in its visible module, as an :class:`Exercise`: how to run learner
code on a :class:`Case` (``run``), the reference's outputs there (``reference``), its known
mistakes (``mistakes = {MISTAKE: run(case, device) -> Outputs}``) and the visible cases. The
visible check runs those cases (:meth:`Exercise.run_cases`); the hidden check is a short
subclass that adds grading's own: more instances of the same kinds of case, a second device,
records. Learner code is always called through :meth:`Exercise.call`, under the tripwires of
``forbidden`` on both sides (:mod:`course.checking.forbidden`): a call to the reference fails the
visible check with grading's words. After the cases, both sides run the one device probe
(:meth:`Exercise.probe_devices`, :mod:`course.checking.devices`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from course.checking.devices import (
    WITHOUT_DEVICE_PROBE,
    UnplacedOnMeta,
    check_device_independence,
    expect_placed,
)
from course.checking.failure import CheckFailure
from course.checking.forbidden import NOTHING, Forbidden, call_guarded
from course.checking.mistakes import Mistake
from course.checking.outputs import Outputs, compare_outputs, generator, randn
from course.checking.pieces import reference_pieces


@dataclass(frozen=True)
class Case:
    """One input configuration: ``params`` holds shapes and options, ``seed`` fixes the data, and
    ``kind`` names what it tests ("4-D, padding mask"), the same words on both sides: every kind
    grading tests has a visible case."""

    name: str
    seed: int
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: torch.dtype = torch.float64
    kind: str = ""

    def __str__(self) -> str:
        return f"case '{self.name}'"


class Exercise:
    """An exercise's check; subclasses fill in ``name``, ``visible_cases``, ``run`` and ``reference``."""

    name: str = ""
    reference_name: str = "the PyTorch reference"
    #: Known mistakes, each with ``run(case, device) -> Outputs`` reproducing it on a case.
    mistakes: Mapping[Mistake, Callable[..., Outputs]] = {}
    visible_cases: Sequence[Case] = ()
    #: What learner code may not call: the reference it is graded against.
    forbidden: Forbidden = NOTHING
    #: The earlier exercises learner code may call, each with the reference it stands for while this one
    #: is checked (:mod:`course.checking.pieces`): a mistake in a piece costs the piece's exercise only.
    builds_on: Mapping[str, Callable] = {}
    #: Does learner code take tensors (a prediction's answer is a value: no device to follow)?
    takes_tensors = True
    #: True during the device probe's run on the CPU: learner code makes its unplaced tensors on 'meta'.
    _unplaced_on_meta = False
    #: True during the device probe's runs: checks of a case that do not depend on its device (a
    #: module built apart and run on the CPU) are left out there.
    probing = False
    #: How many visible cases the probe also runs with every input on 'meta' (slow: its kernels are
    #: Python's). The visible check runs one; grading all of them.
    cases_on_meta: float = 1

    def cases(self) -> Sequence[Case]:
        """The cases this side runs (grading's subclass lists its own)."""
        return self.visible_cases

    def call(self, case: Case, function, *args, **kwargs):
        """Call learner code on ``case``; its errors become failures that name the case, a call
        to the reference a :class:`~course.checking.forbidden.ForbiddenCall`."""
        with self.learner_code():
            return call_guarded(self.name, self.forbidden, str(case), function, *args, **kwargs)

    def learner_code(self):
        """The context learner code runs in (:meth:`call`'s, for a check that calls it otherwise):
        during the device probe's run on the CPU, its unplaced tensors go to 'meta'."""
        return UnplacedOnMeta() if self._unplaced_on_meta else nullcontext()

    def build(self, impl, case: Case, *args, **kwargs) -> torch.nn.Module:
        """The learner's module for ``case`` (its class called with ``args``), in the case's dtype;
        its constructor may make parameters without a device (``.to(device)`` moves them)."""
        module = call_guarded(self.name, self.forbidden, str(case), impl, *args, **kwargs)
        if not isinstance(module, torch.nn.Module):
            raise CheckFailure(f"{self.name}(...) should create an nn.Module, not a {type(module).__name__}.")
        return module.to(dtype=case.dtype)

    def run(self, impl, case: Case, device: torch.device) -> Outputs:
        """The learner's outputs (and gradients) on ``case``."""
        raise NotImplementedError

    def reference(self, case: Case, device: torch.device) -> Outputs:
        """The reference's outputs (and gradients) on ``case``."""
        raise NotImplementedError

    def expected(self, case: Case, device: torch.device) -> Outputs:
        """The reference's outputs on ``case``, computed once per process (they are seeded)."""
        cache = self.__dict__.setdefault("_expected", {})
        key = (case.name, case.seed, str(device))
        if key not in cache:
            cache[key] = self.reference(case, device)
        return cache[key]

    def evaluate(self, case: Case, got: Outputs, device: torch.device) -> None:
        """Fail unless ``got`` matches the reference on ``case``, naming the mistake it matches."""
        variants = {m: partial(run, case, device) for m, run in self.mistakes.items()}
        compare_outputs(got, self.expected(case, device), self.name, str(case), against=self.reference_name,
                        variants=variants, device=device)

    def extra_checks(self, impl, device: torch.device) -> None:
        """Checks beyond the cases (errors for bad arguments); the device probe follows them."""

    @property
    def probes_devices(self) -> bool:
        """Does the device probe apply (all but predictions and :data:`WITHOUT_DEVICE_PROBE`)?"""
        return self.takes_tensors and self.name not in WITHOUT_DEVICE_PROBE

    def probe_devices(self, impl) -> None:
        """Every visible case again on the CPU with the tensors learner code makes without a device
        on 'meta', and the first :attr:`cases_on_meta` of them with every input on 'meta' too: a
        tensor made on a fixed device fails one of them, on any machine
        (:mod:`course.checking.devices`)."""
        if not self.probes_devices:
            return
        self.probing = True
        try:
            for number, case in enumerate(self.visible_cases):
                if number < self.cases_on_meta:
                    check_device_independence(self.name, partial(self.run, impl, case))
                self._unplaced_on_meta = True
                try:
                    expect_placed(self.name, partial(self.run, impl, case, torch.device("cpu")))
                finally:
                    del self._unplaced_on_meta
        finally:
            del self.probing

    def run_cases(self, impl, device: torch.device | str = "cpu") -> None:
        """Every case against the reference, the extra checks, then the device probe: the visible
        check."""
        device = torch.device(device)
        with self.on_reference_pieces(impl):
            for case in self.cases():
                self.evaluate(case, self.run(impl, case, device), device)
            self.extra_checks(impl, device)
            self.probe_devices(impl)

    def on_reference_pieces(self, impl):
        """The context a check runs in: the pieces of :attr:`builds_on` are the references."""
        return reference_pieces(impl, self.builds_on)


def seeded_parameters(shapes: Mapping[str, Sequence[int]], case: Case,
                      device: torch.device) -> dict[str, torch.Tensor]:
    """Random values for every parameter of a case (LayerNorm weights included)."""
    g = generator(case.seed + 104729)
    return {name: randn(shape, g, case.dtype, device, scale=0.5) for name, shape in shapes.items()}
