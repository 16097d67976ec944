"""Keeping the grade honest when the checks run inside the learner's kernel.

nbgrader runs the hidden tests after the learner's code, in the same Python process, so
learner code can reach anything the checks use. Three layers answer that:

1. **Tripwires.** While learner code runs under a check, a ``TorchFunctionMode`` notes any
   call to the reference the exercise is graded against (``core.ReferenceTripwire``).
2. **Tamper scan.** Before checking, the comparison functions a cheat would replace
   (``torch.allclose``, ``torch.testing.assert_close``, numpy's, ``torch.Tensor``'s
   comparison operators) and the grading modules themselves must still be the ones
   defined in their own installed files.
3. **Clean-process verification.** In grading mode (``COURSE_GRADING_DIR`` set by
   ``python -m grader autograde``) every check saves the learner's outputs as plain
   tensors. After the notebook ran, :func:`verify_records` recomputes the reference in a
   fresh process that never ran learner code and compares again. An exercise whose test
   cell passed but whose outputs are missing or wrong there gets no credit and is flagged.

Learner code runs with the grader's rights: see the README's "Grading safely".
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

GRADING_DIR_ENV = "COURSE_GRADING_DIR"
RECORD_SUFFIX = ".record.pt"


def grading_dir() -> Path | None:
    """Where records go while grading, or None when a learner runs the notebook."""
    value = os.environ.get(GRADING_DIR_ENV)
    return Path(value) if value else None


@dataclass
class Record:
    """The learner's outputs for one exercise's check, saved for clean verification."""

    exercise: str
    cases: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    passed: bool = False

    def add(self, case: str, outputs: dict[str, torch.Tensor]) -> None:
        self.cases[case] = outputs

    def flag(self, reason: str) -> None:
        self.flags.append(reason)

    def save(self, device: torch.device) -> None:
        """Write the record when grading; do nothing otherwise."""
        folder = grading_dir()
        if folder is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        payload = {"exercise": self.exercise, "passed": self.passed, "flags": list(self.flags),
                   "device": str(device), "torch": str(torch.__version__), "cases": self.cases}
        torch.save(payload, folder / f"{self.exercise}{RECORD_SUFFIX}")


# ---------------------------------------------------------------- tamper scan


def _watched() -> dict[str, object]:
    """Objects a cheat would replace, by dotted name."""
    import numpy
    import numpy.testing

    return {
        "torch.allclose": torch.allclose,
        "torch.isclose": torch.isclose,
        "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "numpy.allclose": numpy.allclose,
        "numpy.testing.assert_allclose": numpy.testing.assert_allclose,
        "torch.Tensor.__sub__": torch.Tensor.__sub__,
        "torch.Tensor.abs": torch.Tensor.abs,
        "torch.Tensor.__le__": torch.Tensor.__le__,
        "torch.Tensor.all": torch.Tensor.all,
    }


BUILTIN_TYPES = {"builtin_function_or_method", "method_descriptor", "wrapper_descriptor"}


def _defined_in(obj: object, package_dir: Path) -> bool:
    """True when ``obj`` (and whatever it wraps) is a builtin or lives under ``package_dir``."""
    layer = obj
    while True:
        code = getattr(layer, "__code__", None)
        if code is not None and not Path(code.co_filename).resolve().is_relative_to(package_dir):
            return False
        if not hasattr(layer, "__wrapped__"):
            break
        layer = layer.__wrapped__
    return getattr(layer, "__code__", None) is not None or type(layer).__name__ in BUILTIN_TYPES


def _package_dir(name: str) -> Path:
    return Path(sys.modules[name].__file__).resolve().parent


def tamper_report() -> list[str]:
    """What has been replaced in the grading environment; empty when all is as installed."""
    problems = []
    dirs = {"torch": _package_dir("torch"), "numpy": _package_dir("numpy")}
    for name, obj in _watched().items():
        if not _defined_in(obj, dirs[name.split(".")[0]]):
            problems.append(f"{name} was replaced")
    return problems + _grader_tampering(Path(__file__).resolve().parent)


def _grader_tampering(grader_dir: Path) -> list[str]:
    """Grading modules replaced in sys.modules, or their functions swapped for others."""
    problems = []
    for module_name, module in list(sys.modules.items()):
        if module_name != "grader" and not module_name.startswith("grader."):
            continue
        file = getattr(module, "__file__", None)
        if file is None or not Path(file).resolve().is_relative_to(grader_dir):
            problems.append(f"sys.modules['{module_name}'] is not the installed grader")
            continue
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) == module_name and \
                    not _code_lives_in(value, grader_dir):
                problems.append(f"{module_name}.{name} was replaced")
    return problems


STDLIB_DIR = Path(contextlib.__file__).resolve().parent


def _code_lives_in(function: object, grader_dir: Path) -> bool:
    """True when a grader function is the one in grader/ (stdlib decorators allowed around it)."""
    layer = function
    while True:
        code = getattr(layer, "__code__", None)
        if code is None:
            return True  # classes, constants: not functions
        where = Path(code.co_filename).resolve()
        if where.is_relative_to(grader_dir):
            return True
        if not where.is_relative_to(STDLIB_DIR) or not hasattr(layer, "__wrapped__"):
            return False
        layer = layer.__wrapped__


# ---------------------------------------------------------------- clean verification


@dataclass(frozen=True)
class Verdict:
    """The clean process's view of one exercise."""

    exercise: str
    passed: bool
    flags: tuple[str, ...]
    reason: str = ""


def load_record(path: Path) -> dict:
    """A saved record, loaded without running any pickled code."""
    return torch.load(path, map_location="cpu", weights_only=True)


def verify_record(path: Path) -> Verdict:
    """Recompute the reference for a record's cases and compare with what was saved."""
    from grader.checks import EXERCISES
    from grader.checks.core import Case, CheckFailure, grading_device

    record = load_record(path)
    name = record["exercise"]
    flags = tuple(record["flags"])
    if not record["passed"]:
        return Verdict(name, False, flags, "the check failed in the notebook")
    exercise = EXERCISES[name]
    cases: dict[str, Case] = {c.name: c for c in exercise.cases()}
    if set(record["cases"]) != set(cases):
        return Verdict(name, False, flags + ("saved cases do not match the check's cases",))
    device = grading_device()
    try:
        for case_name, got in record["cases"].items():
            exercise.evaluate(cases[case_name], {k: v.to(device) for k, v in got.items()}, device)
    except CheckFailure as failure:
        reason = f"outputs do not match the reference in a clean process: {failure}"
        return Verdict(name, False, flags + (reason,), reason)
    return Verdict(name, True, flags)


def verify_records(folder: Path) -> dict[str, Verdict]:
    """Verdicts for every record in ``folder``, by exercise name."""
    verdicts = {}
    for path in sorted(folder.glob(f"*{RECORD_SUFFIX}")):
        verdict = verify_record(path)
        verdicts[verdict.exercise] = verdict
    return verdicts


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.integrity DIR``: print the verdicts as JSON."""
    folder = Path((argv or sys.argv[1:])[0])
    verdicts = verify_records(folder)
    print(json.dumps({k: {"passed": v.passed, "flags": list(v.flags), "reason": v.reason}
                      for k, v in verdicts.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
