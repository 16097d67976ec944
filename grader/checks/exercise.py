"""An exercise's hidden check: run every case, compare, diagnose, record.

A section module (``s10_2`` ...) defines one :class:`Exercise` subclass per exercise, lists
one instance of each in ``EXERCISES`` and binds ``check_<name>`` to that instance's
``check``; the hidden test cell calls that function with the learner's function or class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch
from torch.overrides import TorchFunctionMode

from grader.checks import integrity
from grader.checks.core import (
    Case,
    CheckFailure,
    ForbiddenCall,
    Mistake,
    Outputs,
    call_learner,
    compare_outputs,
    detach_outputs,
    exact_matmul,
    generator,
    grading_device,
    randn,
)
from grader.checks.tripwire import NOTHING, Forbidden, function_name


class Exercise:
    """Subclasses fill in ``name``, ``cases``, ``run`` and ``reference``."""

    name: str = ""
    reference_name: str = "the PyTorch reference"
    forbidden: Forbidden = NOTHING
    mistakes: Mapping[str, Mistake] = {}

    def cases(self) -> Sequence[Case]:
        raise NotImplementedError

    def run(self, impl, case: Case, device: torch.device) -> Outputs:
        """The learner's outputs (and gradients) on ``case``; raises CheckFailure on errors."""
        raise NotImplementedError

    def reference(self, case: Case, device: torch.device) -> Outputs:
        """PyTorch's outputs (and gradients) on ``case``."""
        raise NotImplementedError

    def extra_checks(self, impl, device: torch.device) -> None:
        """Checks beyond the cases: errors for bad arguments, device independence."""

    def expected(self, case: Case, device: torch.device) -> Outputs:
        """The reference's outputs on ``case``, computed once per process: they are seeded,
        so the grader verifies a whole class against one computation."""
        cache = self.__dict__.setdefault("_expected", {})
        key = (case.name, case.seed, str(device))
        if key not in cache:
            cache[key] = self.reference(case, device)
        return cache[key]

    def evaluate(self, case: Case, got: Outputs, device: torch.device) -> None:
        """Raise CheckFailure unless ``got`` matches the reference on ``case``."""
        def mistake_outputs() -> dict[str, Outputs]:
            return {name: m.run(case, device) for name, m in self.mistakes.items()}

        compare_outputs(self.name, case, got, self.expected(case, device), mistake_outputs,
                        self.mistakes, device)

    def check(self, impl) -> None:
        """The hidden test: every case against the reference, then the extra checks."""
        device = grading_device()
        record = integrity.Record(self.name)
        try:
            with exact_matmul(), single_thread():
                self._check_all(impl, device, record)
        except ForbiddenCall as failure:
            record.flag(str(failure))
            raise
        finally:
            record.save(device)
        print(f"✓ {self.name}: {len(self.cases())} cases match {self.reference_name} on {device}.")

    def _check_all(self, impl, device: torch.device, record: integrity.Record) -> None:
        tampering = integrity.tamper_report()
        if tampering:
            record.flag("; ".join(tampering))
            raise CheckFailure("The grading environment was modified: " + "; ".join(tampering))
        for case in self.cases():
            got = self.run(impl, case, device)
            self.evaluate(case, got, device)
            record.add(case.name, detach_outputs(got))
        self.extra_checks(impl, device)
        record.passed = True


# ---------------------------------------------------------------- helpers for subclasses


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """One CPU thread while checking: hundreds of tiny ops run faster without thread hand-offs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def forward_backward(call: Callable[[], Sequence[torch.Tensor]], names: Sequence[str],
                     leaves: Mapping[str, torch.Tensor], seed: int) -> Outputs:
    """Run ``call``, backpropagate seeded random cotangents, return outputs and gradients.

    ``leaves`` are the tensors (inputs, parameters) whose gradients are compared, as
    ``"grad <name>"``. A leaf that got no gradient counts as a zero gradient.
    """
    outputs = dict(zip(names, call()))
    g = generator(seed + 7919)
    differentiable = [t for t in outputs.values() if t.requires_grad]
    if differentiable:
        loss = sum((t * randn(t.shape, g, t.dtype, t.device)).sum() for t in differentiable)
        loss.backward()
    grads = {f"grad {k}": (v.grad if v.grad is not None else torch.zeros_like(v))
             for k, v in leaves.items()}
    return {**{k: v.detach() for k, v in outputs.items()}, **grads}


def expect_value_error(exercise: str, call: Callable[[], object], situation: str) -> None:
    """Check that ``call`` raises ValueError (the contract's error for bad arguments)."""
    try:
        call()
    except ValueError:
        return
    except NotImplementedError:
        raise CheckFailure(f"{exercise} is not implemented yet.") from None
    except Exception as error:  # noqa: BLE001 - learner code
        raise CheckFailure(
            f"{exercise} should raise ValueError {situation}, but raised "
            f"{type(error).__name__}: {error}"
        ) from None
    raise CheckFailure(f"{exercise} should raise ValueError {situation}, but raised nothing.")


def check_device_independence(exercise: str, call: Callable[[torch.device], object]) -> None:
    """Run learner code with every input on the 'meta' device.

    Code that creates a tensor on a fixed device (``device="cpu"``, ``.cuda()``) then
    fails with a device mismatch, even on a machine without a GPU. Other errors on
    'meta' (``.item()``, unsupported ops) say nothing about devices and are ignored.
    """
    try:
        call(torch.device("meta"))
    except Exception as error:  # noqa: BLE001 - learner code
        text = str(error)
        if "expected device" in text or "same device" in text:
            raise CheckFailure(
                f"{exercise} creates a tensor on a fixed device: with inputs on another "
                f"device it fails with '{text.splitlines()[0]}'. Create new tensors with "
                "device=x.device (or torch.zeros_like(x), x.new_ones(...))."
            ) from None


#: Factory functions that create a tensor from scratch, on the default device unless told.
FACTORIES = frozenset(f"torch.{name}" for name in (
    "arange", "zeros", "ones", "full", "empty", "tensor", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "randperm", "as_tensor", "empty_strided"))


class _UnplacedOnMeta(TorchFunctionMode):
    """Moves every tensor a factory function creates without a ``device`` to 'meta'.

    The inputs stay on the CPU, so code that creates its tensors with ``device=x.device``
    never touches 'meta'; an unplaced one then meets the CPU inputs and fails with a device
    mismatch. 0-d tensors stay where they are: they mix with tensors on any device.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if (function_name(func) in FACTORIES and kwargs.get("device") is None
                and not (args and isinstance(args[0], torch.Tensor))
                and isinstance(result, torch.Tensor) and result.dim() > 0):
            return result.to("meta")
        return result


def check_unplaced_tensors(exercise: str, call: Callable[[], object]) -> None:
    """Run learner code on CPU inputs with unplaced new tensors moved to 'meta'.

    The cheap cousin of :func:`check_device_independence` for code that builds index or
    frequency tensors (``torch.arange``): ``arange`` on 'meta' costs PyTorch a second of
    imports, while here only a wrong answer ever runs on 'meta'.
    """
    try:
        with _UnplacedOnMeta():
            call()
    except Exception as error:  # noqa: BLE001 - learner code
        text = str(error)
        if "expected device" in text or "same device" in text:
            raise CheckFailure(
                f"{exercise} creates a tensor without a device (torch.arange(n), torch.zeros(...)): "
                "it lands on the CPU even when the inputs are on a GPU, and fails there. Create new "
                "tensors with device=x.device (or torch.zeros_like(x), x.new_ones(...))."
            ) from None


def load_parameters(module: torch.nn.Module, values: Mapping[str, torch.Tensor],
                    exercise: str, how: str) -> dict[str, torch.nn.Parameter]:
    """Copy the check's seeded values into the learner's module, by the contract's names.

    ``how`` tells the learner how the submodules should be created when a name or shape
    is off. Returns the learner's parameters by name, ready to collect gradients from.
    """
    if not isinstance(module, torch.nn.Module):
        raise CheckFailure(f"{exercise} should be an nn.Module subclass; got {type(module).__name__}.")
    params = dict(module.named_parameters())
    missing = [name for name in values if name not in params]
    extra = sorted(set(params) - set(values))
    if missing or extra:
        detail = (f"missing {', '.join(missing)}" if missing else "") + \
                 ("; " if missing and extra else "") + \
                 (f"unexpected {', '.join(extra)}" if extra else "")
        raise CheckFailure(f"{exercise} has the wrong parameters ({detail}). {how}")
    for name, value in values.items():
        if tuple(params[name].shape) != tuple(value.shape):
            raise CheckFailure(f"{exercise}: parameter {name} has shape {tuple(params[name].shape)}, "
                               f"expected {tuple(value.shape)}. {how}")
        with torch.no_grad():
            params[name].copy_(value)
    return {name: params[name] for name in values}


def build_module(exercise: str, forbidden: Forbidden, case: Case, cls, *args, **kwargs):
    """Instantiate the learner's class; its errors become CheckFailures."""
    module = call_learner(exercise, forbidden, case, cls, *args, **kwargs)
    if not isinstance(module, torch.nn.Module):
        raise CheckFailure(f"{exercise}(...) should create an nn.Module, got {type(module).__name__}.")
    return module.to(dtype=case.dtype)


def seeded_parameters(shapes: Mapping[str, Sequence[int]], case: Case,
                      device: torch.device) -> dict[str, torch.Tensor]:
    """Random values for every parameter of a case (LayerNorm weights included)."""
    g = generator(case.seed + 104729)
    return {name: randn(shape, g, case.dtype, device, scale=0.5) for name, shape in shapes.items()}
