"""Does the grader keep its shape: the kernel side apart from the host side, exercises bound
by name, paths defined once, the command line working from an installed copy?"""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.checks import EXERCISES, SECTIONS
from tests.conftest import ROOT
from tests.submissions import planted

#: What code that runs inside a learner's kernel may import, besides the standard library.
KERNEL_SIDE_MAY_IMPORT = ("torch", "numpy", "course", "grader.checks")


def imported_modules(path: Path, package: str | None = None) -> set[str]:
    """Every module a Python file imports (absolute names; relative imports resolved
    against ``package``, by default the file's place in this checkout)."""
    package = package or ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            found.add(".".join(p for p in (base, node.module or "") if p))
    return found


def host_side_imports(checks: Path) -> list[str]:
    """Imports of the kernel-side modules in ``checks`` beyond what they may import."""
    stdlib = sys.stdlib_module_names | {"__future__"}
    found = []
    for path in sorted(checks.glob("*.py")):
        for module in imported_modules(path, package="grader.checks"):
            allowed = module.split(".")[0] in stdlib or any(
                module == a or module.startswith(a + ".") for a in KERNEL_SIDE_MAY_IMPORT)
            if not allowed:
                found.append(f"{path.name} imports {module}")
    return found


def test_kernel_side_imports_nothing_of_the_host_side():
    """Does grader/checks/ import only the standard library, torch, numpy, course and itself?"""
    assert host_side_imports(ROOT / "grader" / "checks") == []


def test_the_check_finds_a_planted_host_import(tmp_path):
    """Would a kernel-side module importing the host side be caught (testing the test)?"""
    checks = shutil.copytree(ROOT / "grader" / "checks", tmp_path / "checks",
                             ignore=shutil.ignore_patterns("__pycache__"))
    (checks / "planted_probe.py").write_text("from grader.autograde import report\n")
    (checks / "relative_probe.py").write_text("from ..autograde import pool\n")
    assert host_side_imports(checks) == ["planted_probe.py imports grader.autograde",
                                         "relative_probe.py imports grader.autograde"]


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_check_functions_are_bound_by_name(section):
    """Is every check_<name> of a section the check of the exercise named <name>, and does
    every exercise have one?"""
    module = SECTIONS[section]
    exercises = list(module.EXERCISES.values()) if isinstance(module.EXERCISES, dict) else module.EXERCISES
    bound = {name[len("check_"):]: getattr(module, name) for name in dir(module)
             if name.startswith("check_") and inspect.ismethod(getattr(module, name))}
    assert set(bound) == {e.name for e in exercises}
    for exercise in exercises:
        assert bound[exercise.name].__self__ is exercise, exercise.name
        assert EXERCISES[exercise.name] is exercise


def test_exercise_names_are_unique():
    """Can the clean-process verifier find every exercise by its name alone?"""
    names = [e.name for module in SECTIONS.values()
             for e in (module.EXERCISES.values() if isinstance(module.EXERCISES, dict) else module.EXERCISES)]
    assert len(names) == len(set(names)) == len(EXERCISES)


def test_bench_imports_nothing_from_tests():
    """Is bench/ free of imports from tests/ (tests may use bench's samples, not the reverse)?"""
    for path in sorted((ROOT / "bench").glob("*.py")):
        assert not {m for m in imported_modules(path) if m.split(".")[0] == "tests"}, path.name


@pytest.mark.parametrize("package", ["grader/__init__.py", "grader/autograde/__init__.py",
                                     "grader/publish/__init__.py"])
def test_package_faces_import_nothing(package):
    """Do the package __init__ files import nothing (the sandbox launcher stays light)?"""
    assert imported_modules(ROOT / package) == set()


def test_only_the_command_line_exits():
    """Does no library module raise SystemExit (only grader/__main__.py and the sandbox
    launcher's own command line turn errors into exit codes)?"""
    for path in sorted((ROOT / "grader").rglob("*.py")):
        if path.name == "__main__.py" or path.name == "sandbox.py":
            continue
        assert "raise SystemExit" not in path.read_text(), path.relative_to(ROOT)


def run_installed(site: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m grader ARGS`` from a copy of the package in ``site``, this checkout hidden."""
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in "
            f"getattr(f, '__module__', '')]; sys.path[:] = [{str(site)!r}] + [p for p in sys.path "
            f"if p not in ('', {str(ROOT)!r})]; from grader.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")
    environment = {k: v for k, v in os.environ.items() if k != "COURSE_ROOT"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, env={**environment, **env}, timeout=300)


def test_installed_grader_finds_the_course(tmp_path):
    """Does the command line work from an installed package (not a checkout): from the course
    folder, from elsewhere with COURSE_ROOT, and with a clear error where there is no course?"""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "grader", site / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "course", site / "course", ignore=shutil.ignore_patterns("__pycache__"))
    subs = planted.build(tmp_path / "subs", ["empty-folder"])
    here = run_installed(site, ROOT, "autograde", str(subs), "--out", str(tmp_path / "a"), "--quiet")
    assert here.returncode == 0 and "1 errors" in here.stdout, here.stderr
    elsewhere = run_installed(site, tmp_path, "autograde", str(subs), "--out", str(tmp_path / "b"),
                              "--quiet", COURSE_ROOT=str(ROOT))
    assert elsewhere.returncode == 0, elsewhere.stderr
    lost = run_installed(site, tmp_path, "autograde", str(subs), "--out", str(tmp_path / "c"))
    assert lost.returncode == 1 and "No course folder here" in lost.stderr, lost.stderr
