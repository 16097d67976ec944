"""The kernel's half of keeping the grade honest: records and the tamper scan.

nbgrader runs the hidden tests after the learner's code, in the same Python process, so
learner code can reach anything the checks use. Three layers answer that:

1. **Tripwires.** While learner code runs under a check, the reference it is graded
   against must not be called, through any door (:mod:`course.checking.forbidden`).
2. **Tamper scan** (:func:`tamper_report`). Before checking, the comparison functions a
   cheat would replace (``torch.allclose``, ``torch.testing.assert_close``, numpy's,
   ``torch.Tensor``'s comparison operators) and the grading and course modules themselves
   must still be the ones defined in their own installed files.
3. **Clean-process verification.** In grading mode (``COURSE_GRADING_DIR`` set by
   ``python -m grader autograde``) every check saves the learner's outputs as plain
   tensors in a :class:`Record` (the file: :mod:`course.checking.records`). After the
   notebook ran, the grader recomputes the reference in a process that never ran learner
   code and compares again (:mod:`grader.autograde.worker.verify`). An exercise whose test
   cell passed but whose record is missing or wrong there gets no credit and is flagged.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from course.checking import records

#: Packages whose modules and functions must be the installed ones while checking.
GUARDED_PACKAGES = ("grader", "course")


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
        """Write the record when grading; do nothing otherwise (:mod:`course.checking.records`)."""
        records.save_record(self.exercise, self.passed, self.flags, device, self.cases)


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
STDLIB_DIR = Path(contextlib.__file__).resolve().parent


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
    for package in GUARDED_PACKAGES:
        if package in sys.modules:
            problems += _package_tampering(package, _package_dir(package))
    return problems


def _package_tampering(package: str, package_dir: Path) -> list[str]:
    """Modules of ``package`` replaced in sys.modules, or their functions swapped for others."""
    problems = []
    for module_name, module in list(sys.modules.items()):
        if module_name != package and not module_name.startswith(package + "."):
            continue
        file = getattr(module, "__file__", None)
        if file is None or not Path(file).resolve().is_relative_to(package_dir):
            problems.append(f"sys.modules['{module_name}'] is not the installed {package}")
            continue
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) == module_name and \
                    not _code_lives_in(value, package_dir):
                problems.append(f"{module_name}.{name} was replaced")
    return problems


def _code_lives_in(function: object, package_dir: Path) -> bool:
    """True when a function is the one in ``package_dir`` (stdlib and torch decorators, such as
    ``@torch.no_grad()``, allowed around it)."""
    layer = function
    while True:
        code = getattr(layer, "__code__", None)
        if code is None:
            return True  # classes, constants: not functions
        where = Path(code.co_filename).resolve()
        if where.is_relative_to(package_dir):
            return True
        wrapper = where.is_relative_to(STDLIB_DIR) or where.is_relative_to(_package_dir("torch"))
        if not wrapper or not hasattr(layer, "__wrapped__"):
            return False
        layer = layer.__wrapped__
