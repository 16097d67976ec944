"""Build what a course publishes to learners: ``python -m grader student-bundle OUT``.

The bundle is a folder ready to push as the public student repository: the learner
notebooks, the helpers (``course/``) and data they use, ``requirements.txt``,
``environment.yml`` and Binder's ``postBuild``, and a learner README with Binder and Colab
badges and install steps. Nothing of
``solutions/``, the hidden tests or ``grader/`` goes in, and :func:`find_leaks` proves it
on exactly what is published.

Releases go week by week: ``--through 10.3`` publishes the sections up to 10.3 and nothing
later (later notebooks carry the earlier sections' solutions as given code). Publishing
again into the same folder (a checkout of the student repository) with a later
``--through`` adds the next sections and never rewrites a notebook already published:
learners' copies, and the notebook a Colab badge opens, stay what they were. Helper code,
data and the README are brought up to date (they hold no learner work), after a check that
every published notebook still finds what it imports. ``.course-release.json`` records
what was published, as which repository and branch.

Every published notebook's set-up cell installs the helpers on Colab from the repository
and branch it is published as (:mod:`grader.publish.setup_cell`); the files that set up a
learner's own machine or Binder, and the README, come from :mod:`grader.publish.learner`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from grader.errors import PublishError, UsageError
from grader.paths import RELEASE, assignment_names, course_root, section_of
from grader.publish import learner, setup_cell
from grader.publish.code import RELEASE_FILE, as_python, code_cells, code_text
from grader.publish.leaks import find_leaks

DEFAULT_REPOSITORY = "transformer-course/transformer-course"
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "train_reference.py")
#: Never published: the instructor's folders and files.

# ---------------------------------------------------------------- sections


def learner_assignments(root: Path) -> list[str]:
    """Assignments with a learner notebook in ``root/notebooks``, in section order."""
    return assignment_names(root / RELEASE)


def due_assignments(assignments: list[str], through: str | None) -> list[str]:
    """The assignments up to and including section ``through`` (all when None)."""
    if through is None:
        return list(assignments)
    names = [a for a in assignments if through in (a, section_of(a))]
    if not names:
        raise UsageError(f"--through {through!r}: no such section; choose one of "
                         f"{', '.join(section_of(a) for a in assignments)}.")
    return assignments[: assignments.index(names[0]) + 1]


def notebook_links(root: Path) -> list[tuple[str, str]]:
    """(title, path relative to ``root``) of every learner notebook, in section order."""
    links = []
    for assignment in learner_assignments(root):
        for path in sorted((root / "notebooks" / assignment).glob("*.ipynb")):
            title = path.parent.name.replace("-", " ", 1).replace("-", " ")
            links.append((title, path.relative_to(root).as_posix()))
    return links


def badges(repository: str, branch: str = "main", root: Path | None = None) -> str:
    """Markdown: one Binder badge for the course, one Colab badge per notebook."""
    binder = (f"[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/"
              f"{repository}/{branch}?urlpath=lab/tree/notebooks)")
    rows = ["| notebook | Colab |", "|---|---|"]
    for title, path in notebook_links(root or course_root()):
        colab = f"https://colab.research.google.com/github/{repository}/blob/{branch}/{path}"
        rows.append(f"| [{title}]({path}) | [![Open In Colab]"
                    f"(https://colab.research.google.com/assets/colab-badge.svg)]({colab}) |")
    return binder + "\n\n" + "\n".join(rows) + "\n"


def learner_readme(repository: str, branch: str, root: Path, complete: bool = True) -> str:
    """The release's README (``root``: the release), see :func:`grader.publish.learner.readme`."""
    published = [section_of(a) for a in learner_assignments(root)]
    return learner.readme(badges(repository, branch, root), course_root(), published, complete)


# ---------------------------------------------------------------- what sections use


def parse_code(text: str) -> ast.AST:
    """Python of a code cell or module (see :func:`as_python`)."""
    try:
        return ast.parse(as_python(text))
    except SyntaxError:
        return ast.parse("")


def course_imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every import from the ``course`` package in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[0] == "course"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "course":
            found.append((node.module, [a.name for a in node.names]))
    return found


def module_file(package: Path, module: str) -> Path | None:
    """The file of ``course.x.y`` under ``package`` (the ``course`` folder), if any."""
    parts = module.split(".")[1:]
    base = package.joinpath(*parts) if parts else package
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def gathered_modules(path: Path) -> list[Path]:
    """The modules a package finds at import time (``gather_checks``, as ``course.visible.s10_1``
    does), which no import statement names: all of its own, when ``path`` is its ``__init__``."""
    if path.name != "__init__.py" or "gather_checks(" not in path.read_text():
        return []
    return sorted(path.parent.glob("*.py"))


def helper_files(notebooks: list[Path], package: Path) -> set[Path]:
    """The files of ``package`` (``course/``) the notebooks import, directly or not."""
    todo = [parse_code(text) for nb in notebooks for text in code_cells(nb)]
    needed: set[Path] = {package / "__init__.py"}
    todo.append(ast.parse((package / "__init__.py").read_text()))
    while todo:
        for module, names in course_imports(todo.pop()):
            candidates = [module_file(package, module)]
            candidates += [module_file(package, f"{module}.{n}") for n in names]  # from course import x
            while candidates:
                path = candidates.pop()
                while path is not None and path not in needed:
                    needed.add(path)
                    todo.append(ast.parse(path.read_text()))
                    candidates += gathered_modules(path)
                    init = path.parent / "__init__.py"  # a subpackage needs its __init__
                    path = init if init.is_file() and path != init else None
    needed |= {p for p in package.rglob("*") if p.is_file() and p.suffix not in {".py", ".pyc"}
               and "__pycache__" not in p.parts}
    return needed


def uses_data(texts: list[str], data: Path) -> bool:
    """Whether the published code names a data file of ``data/`` (so data/ goes along)."""
    files = [p.name for p in data.glob("*") if p.is_file() and p.suffix not in {".py", ".md"}]
    return any(name in text for name in files for text in texts)


def defined_names(path: Path) -> set[str]:
    """Top-level names a module defines or imports (what ``from module import x`` can find)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def missing_imports(notebook: Path, package: Path) -> list[str]:
    """``course`` names ``notebook`` imports that ``package`` does not provide."""
    missing = []
    for text in code_cells(notebook):
        for module, names in course_imports(parse_code(text)):
            path = module_file(package, module)
            if path is None:
                missing.append(module)
                continue
            have = defined_names(path)
            missing += [f"{module}.{n}" for n in names
                        if n not in have and module_file(package, f"{module}.{n}") is None]
    return missing


# ---------------------------------------------------------------- publishing


@dataclass
class Release:
    """What one ``student-bundle`` run published."""

    out: Path
    repository: str
    branch: str
    sections: list[str]  # assignments published, all so far
    added: list[str] = field(default_factory=list)  # files new in this run
    updated: list[str] = field(default_factory=list)  # helpers, data, README brought up to date
    kept: list[str] = field(default_factory=list)  # published notebooks that differ from the course's

    def text(self) -> str:
        complete = ", ".join(section_of(a) for a in self.sections)
        lines = [f"student release in {self.out}: sections {complete} "
                 f"(as {self.repository}, branch {self.branch}); no solutions of a section not "
                 "yet due, no hidden tests, no grading code inside."]
        if self.added:
            lines.append(f"added {len(self.added)} file(s): " + ", ".join(self.added))
        if self.updated:
            lines.append("updated: " + ", ".join(self.updated))
        if not self.added and not self.updated:
            lines.append("nothing to add: the folder already holds this release.")
        for path in self.kept:
            lines.append(f"kept {path} as learners have it: the course's version differs now "
                         "(published notebooks are never rewritten)")
        return "\n".join(lines)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_release(out: Path) -> dict | None:
    """The record of an earlier release in ``out``; None for a new or empty folder."""
    record = out / RELEASE_FILE
    if record.is_file():
        return json.loads(record.read_text())
    if out.exists() and any(p.name != ".git" for p in out.iterdir()):
        raise PublishError(f"{out} is not empty and holds no student release ({RELEASE_FILE}): "
                           "choose a new folder, or a checkout of the student repository you "
                           "published into before.")
    return None


def check_continues(previous: dict, repository: str, branch: str, due: list[str]) -> None:
    """A later release must be the same repository and branch, and withdraw nothing."""
    if (previous["repository"], previous["branch"]) != (repository, branch):
        raise PublishError(
            f"This folder was published as {previous['repository']} (branch "
            f"{previous['branch']}), not {repository} ({branch}): its notebooks fetch their "
            "helpers from there. Publish a new term into a new folder.")
    withdrawn = [a for a in previous["sections"] if a not in due]
    if withdrawn:
        raise PublishError(
            f"Already published through {section_of(previous['sections'][-1])}: --through "
            f"{section_of(due[-1])} would withdraw {', '.join(withdrawn)}, which learners have. "
            f"Publish --through {section_of(previous['sections'][-1])} or later.")


def published_notebook(source: Path, repository: str, branch: str) -> str:
    """A learner notebook as published: its set-up cell points at ``repository``/``branch``."""
    nb = nbformat.read(source, as_version=4)
    holders = [c for c in nb.cells if c.cell_type == "code" and setup_cell.course_source(c.source)
               is not None]
    where = f"{source.parent.name}/{source.name}"
    if len(holders) != 1:
        raise PublishError(f"{where}: expected one cell with the helpers' pip line (the set-up "
                           f"cell), found {len(holders)}; restore it in solutions/ and run "
                           "`python -m grader generate`.")
    (cell,) = holders
    cell.source = setup_cell.point_at(cell.source, repository, branch, f"the set-up cell of {where}")
    meta = cell.metadata.get("nbgrader", {})
    if "checksum" in meta:  # nbgrader's validate compares a locked cell with its checksum
        from nbgrader.utils import compute_checksum

        meta["checksum"] = compute_checksum(cell)
    return nbformat.writes(nb) + "\n"


def stage(staging: Path, root: Path, due: list[str], repository: str, branch: str,
          complete: bool) -> list[str]:
    """Write the release of ``due`` over the copy of the earlier one in ``staging``.

    Notebooks already there are left alone; returns those that now differ from the course's.
    """
    kept = []
    notebooks = []
    for assignment in due:
        for source in sorted((root / "notebooks" / assignment).glob("*.ipynb")):
            target = staging / "notebooks" / assignment / source.name
            text = published_notebook(source, repository, branch)
            if target.exists():
                if target.read_text() != text:
                    kept.append(target.relative_to(staging).as_posix())
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            notebooks.append(target)
    package = root / "course"
    for path in helper_files(notebooks, package):
        target = staging / "course" / path.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    shipped = [p for p in (staging / "course").rglob("*.py")] + notebooks
    if (root / "data").is_dir() and uses_data([code_text(p) for p in shipped], root / "data"):
        shutil.copytree(root / "data", staging / "data", ignore=IGNORED, dirs_exist_ok=True)
    shutil.copy2(root / "postBuild", staging / "postBuild")
    (staging / "requirements.txt").write_text(learner.requirements(root))
    (staging / "environment.yml").write_text(learner.environment(root))
    packages = sorted(".".join(p.parent.relative_to(staging).parts)
                      for p in (staging / "course").rglob("__init__.py"))
    (staging / "pyproject.toml").write_text(learner.pyproject(packages, (staging / "data").is_dir()))
    (staging / "README.md").write_text(learner_readme(repository, branch, staging, complete))
    broken = [f"{p.relative_to(staging)} imports {name}" for p in
              sorted((staging / "notebooks").glob("*/*.ipynb"))
              for name in missing_imports(p, staging / "course")]
    if broken:
        raise PublishError("Published notebooks would no longer find their helpers:\n  "
                           + "\n  ".join(broken) + "\nKeep those names in course/ (learners' "
                           "notebooks import them), then publish again.")
    return kept


def publish(out: Path, repository: str = DEFAULT_REPOSITORY, branch: str = "main",
            through: str | None = None, root: Path | None = None) -> Release:
    """Publish the sections up to ``through`` (all when None) of the course at ``root``
    into ``out``: a new or empty folder, or the folder of an earlier release (see the
    module docstring). Nothing is written to ``out`` unless the whole release is clean."""
    root = root or course_root()
    setup_cell.check_names(repository, branch)
    assignments = learner_assignments(root)
    if not assignments:
        raise PublishError("notebooks/ has no learner notebooks: run `python -m grader generate`.")
    due = due_assignments(assignments, through)
    previous = read_release(out)
    if previous:
        check_continues(previous, repository, branch, due)
    with tempfile.TemporaryDirectory(prefix="student-release-") as scratch:
        staging = Path(scratch) / "release"
        if out.is_dir():
            shutil.copytree(out, staging, ignore=shutil.ignore_patterns(".git"))
        staging.mkdir(exist_ok=True)
        kept = stage(staging, root, due, repository, branch, complete=due == assignments)
        files = {p.relative_to(staging).as_posix(): digest(p)
                 for p in sorted(staging.rglob("*")) if p.is_file() and p.name != RELEASE_FILE}
        record = {"repository": repository, "branch": branch, "through": section_of(due[-1]),
                  "sections": due, "notebooks": {k: v for k, v in files.items()
                                                 if k.startswith("notebooks/")}}
        (staging / RELEASE_FILE).write_text(json.dumps(record, indent=1) + "\n")
        leaks = find_leaks(staging, root / "solutions", due)
        if leaks:
            raise PublishError("The student release would leak instructor material (nothing "
                               "was written):\n" + "\n".join(leaks))
        release = Release(out, repository, branch, due, kept=kept)
        out.mkdir(parents=True, exist_ok=True)
        for path in sorted(staging.rglob("*")):
            relative = path.relative_to(staging).as_posix()
            target = out / relative
            if path.is_dir() or (target.is_file() and target.read_bytes() == path.read_bytes()):
                continue
            if relative != RELEASE_FILE:
                (release.updated if target.exists() else release.added).append(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return release


def build_student_bundle(out: Path, repository: str = DEFAULT_REPOSITORY, branch: str = "main",
                         root: Path | None = None, through: str | None = None) -> Path:
    """:func:`publish`, returning the folder."""
    return publish(out, repository, branch, through, root).out
