"""Does the grader keep its shape: the kernel side apart from the host side, the host side
laid out by process, exercises bound by name, paths and constants defined once, modules
small, tests apart from the benchmarks, the command line working from an installed copy?"""

from __future__ import annotations

import ast
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.checks import EXERCISES, SECTIONS
from tests.settings import ROOT
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
    """Imports of the kernel-side modules in ``checks``, at every depth, beyond what they may
    import."""
    stdlib = sys.stdlib_module_names | {"__future__"}
    found = []
    for path in sorted(checks.rglob("*.py")):
        inside = path.relative_to(checks)
        package = ".".join(("grader", "checks", *inside.parts[:-1]))
        for module in imported_modules(path, package=package):
            allowed = module.split(".")[0] in stdlib or any(
                module == a or module.startswith(a + ".") for a in KERNEL_SIDE_MAY_IMPORT)
            if not allowed:
                found.append(f"{inside.as_posix()} imports {module}")
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
    (checks / "s10_6" / "deep_probe.py").write_text("from ...autograde.host import run\n")
    assert host_side_imports(checks) == ["planted_probe.py imports grader.autograde",
                                         "relative_probe.py imports grader.autograde",
                                         "s10_6/deep_probe.py imports grader.autograde.host"]


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_check_functions_are_bound_by_name(section):
    """Is every check_<name> of a section the check of the exercise named <name>, and does
    every exercise have one?"""
    module = SECTIONS[section]
    exercises = list(module.EXERCISES.values())
    bound = {name[len("check_"):]: getattr(module, name) for name in dir(module)
             if name.startswith("check_") and inspect.ismethod(getattr(module, name))}
    assert set(bound) == {e.name for e in exercises}
    for exercise in exercises:
        assert bound[exercise.name].__self__ is exercise, exercise.name
        assert EXERCISES[exercise.name] is exercise


def test_exercise_names_are_unique():
    """Can the clean-process verifier find every exercise by its name alone?"""
    names = [e.name for module in SECTIONS.values() for e in module.EXERCISES.values()]
    assert len(names) == len(set(names)) == len(EXERCISES)


def test_bench_imports_nothing_from_tests():
    """Is bench/ free of imports from tests/ (both take notebooks from samples.py)?"""
    for path in sorted((ROOT / "bench").rglob("*.py")):
        assert not {m for m in imported_modules(path) if m.split(".")[0] == "tests"}, path.name


#: Test modules that test the benchmarks themselves, and may import them.
TESTS_OF_BENCH = {"test_bench.py", "test_gpu_check.py"}
def test_tests_import_neither_bench_nor_conftest():
    """Do test modules take their helpers from samples.py and tests/settings.py, never from
    bench/ (but the tests of the benchmarks) or conftest.py?"""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        modules = {m.split(".")[0] if m.split(".")[0] == "bench" else m for m in imported_modules(path)}
        if "bench" in modules and path.name not in TESTS_OF_BENCH:
            found.append(f"{path.relative_to(ROOT)} imports bench")
        if any(m.endswith("conftest") for m in modules):
            found.append(f"{path.relative_to(ROOT)} imports conftest")
    assert found == []


FACES = ["grader/__init__.py", "grader/autograde/__init__.py", "grader/autograde/host/__init__.py",
         "grader/autograde/worker/__init__.py", "grader/autograde/worker/preprocessors/__init__.py",
         "grader/autograde/sandbox/__init__.py", "grader/publish/__init__.py"]


@pytest.mark.parametrize("package", FACES)
def test_package_faces_import_nothing(package):
    """Do the package __init__ files import nothing (the sandbox launcher stays light)?"""
    assert imported_modules(ROOT / package) == set()


#: What the code of each process's folder of grader/autograde/ may import of the others:
#: the worker never imports the host, the launcher nothing but itself (the host orchestrates
#: both, and may use anything).
PROCESSES = {"worker": ("worker", "sandbox.config", "messages"),
             "sandbox": ("sandbox",)}


def cross_process_imports(autograde: Path) -> list[str]:
    found = []
    for process, allowed in PROCESSES.items():
        for path in sorted((autograde / process).rglob("*.py")):
            package = "grader.autograde." + ".".join(path.relative_to(autograde).parts[:-1])
            for module in imported_modules(path, package=package):
                if not module.startswith("grader.autograde."):
                    continue
                inside = module[len("grader.autograde."):]
                if not any(inside == a or inside.startswith(a + ".") for a in allowed):
                    found.append(f"{process}/{path.relative_to(autograde / process)} imports {module}")
    return found


def test_each_process_imports_only_its_own_and_the_shared():
    """Does code of the worker or the sandbox launcher never import the host's (and the
    launcher nothing but itself), so that a path says which process runs it?"""
    assert cross_process_imports(ROOT / "grader" / "autograde") == []


def test_the_check_finds_a_planted_cross_process_import(tmp_path):
    """Would a worker module importing the host be caught (testing the test)?"""
    autograde = shutil.copytree(ROOT / "grader" / "autograde", tmp_path / "autograde",
                                ignore=shutil.ignore_patterns("__pycache__"))
    (autograde / "worker" / "planted.py").write_text("from grader.autograde.host import run\n")
    (autograde / "sandbox" / "planted.py").write_text("from ..messages import GradeJob\n")
    found = cross_process_imports(autograde)
    assert "worker/planted.py imports grader.autograde.host" in found
    assert "sandbox/planted.py imports grader.autograde.messages" in found


#: Modules every part of the grader reads, and what of the grader each may import: nothing
#: that imports them back (the arrows go one way, into these).
SHARED = {"grader/results.py": (), "grader/errors.py": (), "grader/paths.py": ("grader.errors",)}


def imports_back_up(root: Path) -> list[str]:
    found = []
    for where, allowed in SHARED.items():
        for module in imported_modules(root / where, package=".".join(Path(where).parts[:-1])):
            if module.split(".")[0] == "grader" and module not in allowed:
                found.append(f"{where} imports {module}")
    return found


def test_shared_modules_import_nothing_that_uses_them():
    """Do the results, the errors and the paths, which the commands, the host and the worker
    all read, import nothing else of the grader?"""
    assert imports_back_up(ROOT) == []


def test_the_check_finds_a_planted_import_back_up(tmp_path):
    """Would grader/results.py importing a command's module be caught (testing the test)?"""
    for where in SHARED:
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / where, tmp_path / where)
    with open(tmp_path / "grader/results.py", "a") as module:
        module.write("from .report import summary\n")
    assert imports_back_up(tmp_path) == ["grader/results.py imports grader.report"]


def test_only_the_command_line_exits():
    """Does no library module raise SystemExit (only grader/__main__.py and the sandbox
    launcher's own command line turn errors into exit codes)?"""
    for path in sorted((ROOT / "grader").rglob("*.py")):
        if path.name == "__main__.py" or path.relative_to(ROOT).as_posix() == \
                "grader/autograde/sandbox/launcher.py":
            continue
        assert "raise SystemExit" not in path.read_text(), path.relative_to(ROOT)


def test_errors_a_user_can_fix_are_typed():
    """Does the grader raise its own typed errors (grader.errors), never a bare RuntimeError
    a user would get as a traceback?"""
    for path in sorted((ROOT / "grader").rglob("*.py")):
        assert "raise RuntimeError" not in path.read_text(), path.relative_to(ROOT)


def raised_text(path: Path) -> str:
    """The string parts of every ``raise`` statement of a module (its error messages)."""
    return " ".join(node.value for r in ast.walk(ast.parse(path.read_text())) if isinstance(r, ast.Raise)
                    for node in ast.walk(r) if isinstance(node, ast.Constant) and isinstance(node.value, str))


def test_hints_name_options_that_exist():
    """Does every command-line option an error message of the grader names exist?"""
    from grader.__main__ import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices.values()
    known = {option for p in (parser, *commands) for action in p._actions
             for option in action.option_strings}
    named = {(path.relative_to(ROOT).as_posix(), option) for path in sorted((ROOT / "grader").rglob("*.py"))
             for option in re.findall(r"(?<![\w-])--[a-z][a-z-]+", raised_text(path))}
    assert any(option == "--memory-mb" for _, option in named)  # the probe's hint is seen
    assert [(where, option) for where, option in named if option not in known] == []


def module_level_definitions(path: Path) -> set[str]:
    """Names a module defines at its top level (assignments, functions, classes)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found.add(name.id)
    return found


#: Paths and constants with one home; no other module of grader/, bench/, tests/ or
#: samples.py defines them (they import them from there).
DEFINED_ONCE = {
    "grader/paths.py": {"COURSE_ID", "SOLUTIONS", "RELEASE", "GRADEBOOK", "PACKAGE_DIR",
                        "NBGRADER_CONFIG", "section_of", "assignment_names", "assignment_folders",
                        "nbgrader_config", "CourseLayout", "grading_packages", "course_root"},
    "grader/results.py": {"exercise_name", "Result", "settle"},
    "course/translation.py": {"DATA_DIR"},
    "course/checking/records.py": {"GRADING_DIR_ENV", "RECORD_SUFFIX", "OUTCOME_SUFFIX", "grading_dir",
                                   "save_record", "load_record", "save_outcome"},
    "samples.py": {"ROOT", "notebook_path", "load_solution_namespace"},
}


def our_modules() -> list[Path]:
    return sorted([*(ROOT / "grader").rglob("*.py"), *(ROOT / "bench").rglob("*.py"),
                   *(ROOT / "tests").rglob("*.py"), ROOT / "samples.py", *(ROOT / "course").rglob("*.py")])


def test_paths_and_constants_are_defined_once():
    """Is each path and constant of the course defined in one module only (the grader's
    folder, the course's and the data's, the assignments, the scratch-course layout, the
    course id, section numbers, nbgrader's configuration, a result's status)?"""
    homes = {name: home for home, names in DEFINED_ONCE.items() for name in names}
    found = []
    for path in our_modules():
        where = path.relative_to(ROOT).as_posix()
        names = module_level_definitions(path) & set(homes)
        if where.startswith("tests/"):  # test modules keep their own Path constants
            names -= {"ROOT", "SOLUTIONS", "RELEASE"}
        for name in names:
            if homes[name] != where:
                found.append(f"{where} defines {name} (its home is {homes[name]})")
        text = "" if where == "tests/test_layout.py" else path.read_text()
        if where != "grader/paths.py" and "PyFileConfigLoader(" in text:
            found.append(f"{where} loads nbgrader's configuration itself")
        if where.startswith("grader/") and where not in ("grader/paths.py", "grader/nbgrader_config.py") and \
                re.search(r"[\"']transformer-course[\"']", text):
            found.append(f"{where} spells the course id")
    assert found == []


def test_the_course_id_and_folders_are_nbgraders():
    """Do grader/paths.py's course id and folders agree with the nbgrader configuration that
    stock nbgrader reads?"""
    from grader.paths import COURSE_ID, NBGRADER_CONFIG, RELEASE, SOLUTIONS

    text = NBGRADER_CONFIG.read_text()
    for key, value in (("course_id", COURSE_ID), ("source_directory", SOLUTIONS),
                       ("release_directory", RELEASE)):
        assert f'c.CourseDirectory.{key} = "{value}"' in text, key


def test_modules_stay_small():
    """Is every module of grader/, course/ and bench/ at most 500 lines, and every test module
    at most 600?"""
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
             for folder in ("grader", "course", "bench", "tests") for p in (ROOT / folder).rglob("*.py")}
    limit = {path: 600 if path.startswith("tests/") else 500 for path in sizes}
    assert {path: n for path, n in sizes.items() if n > limit[path]} == {}


#: A measurement's date (a day without a time of day after it: example timestamps and
#: deadlines in the docs carry one) or its time of day alone ("at 12:04 UTC").
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b(?![T ]\d\d:\d\d:\d\d)|(?<![\d:])[0-2]\d:[0-5]\d UTC")


def dated_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if DATED.search(line)]


def test_dated_measurements_live_in_the_bench_report():
    """Do the README and docs/*.md give targets and point to bench/report.md, quoting no
    dated measurement (which go stale there, and live in bench/report.md only)?"""
    found = {path.relative_to(ROOT).as_posix(): dated_lines(path.read_text())
             for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    assert {path: lines for path, lines in found.items() if lines} == {}
    assert dated_lines("the edit-test loop, 89 s of pytest on 2026-12-01 at 12:43 UTC, 77 s")
    assert dated_lines("kernels in `--jobs 1`: 68.7 s at 11:07, 108.4 s at 12:04 UTC")
    assert not dated_lines("--deadline 2026-12-01T23:59:00+01:00 and `2026-12-01 20:00:00 UTC`")


def performance_targets() -> dict[str, str]:
    """docs/course.md's Performance table: what is measured -> its target."""
    section = (ROOT / "docs" / "course.md").read_text().split("\n## Performance\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", section, flags=re.M)
    return {what: target for what, target in rows if what != "what" and not set(what) <= set("-|")}


#: A time target as the docs and the Makefile's help word it ("under 60 s", "target 60 s").
SECONDS = re.compile(r"\b(?:under|target) (\d+) s\b")


def module_constants(path: Path) -> dict:
    """The literal module-level constants of a Python file, read without importing it."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


def test_time_targets_agree_with_the_performance_table():
    """Does every test-fast and notebook run-time target that README.md, docs/*.md, the Makefile's
    help and bench/report.md state agree with docs/course.md's Performance table, and the table's
    notebook targets with the ones bench/notebooks.py checks? (Covers lines naming test-fast or the
    edit-test loop, and lines naming a notebook with "under/target N s".)"""
    targets = performance_targets()
    (fast,) = [SECONDS.findall(t) for w, t in targets.items() if "test-fast" in w]
    (notebook,) = [SECONDS.findall(t) for w, t in targets.items() if w.startswith("a solution notebook")]
    bench = module_constants(ROOT / "bench" / "notebooks.py")
    assert {int(n) for n in notebook} == {bench["DEFAULT_TARGET_SECONDS"], *bench["TARGET_SECONDS"].values()}
    table = {f"| {w} | {t} |" for w, t in targets.items()}
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Makefile",
             ROOT / "bench" / "report.md"]
    seen, wrong = set(), []
    for path in files:
        for line in path.read_text().splitlines():
            if line in table:
                continue
            if "test-fast" in line or "edit-test loop" in line:
                expected = fast
            elif "notebook" in line:
                expected = notebook
            else:
                continue
            for number in SECONDS.findall(line):
                seen.add((path.name, expected is fast))
                if number not in expected:
                    wrong.append(f"{path.relative_to(ROOT)}: {line.strip()}")
    assert wrong == []
    assert {("README.md", True), ("Makefile", True), ("report.md", True)} <= seen  # the check sees them


def run_installed(site: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m grader ARGS`` from a copy of the package in ``site``, this checkout hidden."""
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in "
            f"getattr(f, '__module__', '')]; sys.path[:] = [{str(site)!r}] + [p for p in sys.path "
            f"if p not in ('', {str(ROOT)!r})]; from grader.__main__ import main; "
            "sys.exit(main(sys.argv[1:]))")
    environment = {k: v for k, v in os.environ.items() if k != "COURSE_ROOT"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, env={**environment, **env}, timeout=300)


@pytest.mark.slow  # fresh Python processes that import torch
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


def later_section_imports(root: Path) -> list[str]:
    """Imports, in the checks of one section, of a later section's checks (10.8's checks build on
    10.6's Transformer; 10.6's must never need 10.8's)."""
    pattern = re.compile(r"(?:grader\.checks|course\.visible)\.s(\d+)_(\d+)")
    found = []
    for side in ("grader/checks", "course/visible"):
        for path in sorted((root / side).glob("s*_*/**/*.py")):
            section = path.relative_to(root / side).parts[0]
            own = tuple(map(int, section[1:].split("_")))
            for module in imported_modules(path, package=".".join(path.relative_to(root).parts[:-1])):
                match = pattern.match(module)
                if match and (int(match[1]), int(match[2])) > own:
                    found.append(f"{path.relative_to(root)} imports {module}")
    return found


def test_sections_import_no_later_section():
    """Does the check of a section import only its own and earlier sections' checks?"""
    assert later_section_imports(ROOT) == []


def test_the_check_finds_a_planted_later_import(tmp_path):
    """Would 10.6's checks importing 10.8's be caught (testing the test)?"""
    for side in ("grader/checks", "course/visible"):
        shutil.copytree(ROOT / side, tmp_path / side, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "grader/checks/s10_6/planted_probe.py").write_text("from grader.checks.s10_8 import sample\n")
    (tmp_path / "grader/checks/s10_6/deep").mkdir()
    (tmp_path / "grader/checks/s10_6/deep/probe.py").write_text("from ...s10_8 import sample\n")
    found = later_section_imports(tmp_path)
    assert found == ["grader/checks/s10_6/deep/probe.py imports grader.checks.s10_8",
                     "grader/checks/s10_6/planted_probe.py imports grader.checks.s10_8"]
