"""Reading a graded notebook: what happened in its cells, and learner code worth a look.

The preprocessors (:mod:`grader.autograde.worker.preprocessors`) leave marks and error outputs in
the cells; :func:`describe_cells` turns them into the grader's notes and errors, and scans
the learner's own code for things that have no business in an exercise.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course.checking.records import GRADING_DIR_ENV, RECORD_SUFFIX
from grader.autograde.worker.preprocessors import cell_marks as pre
from grader.checks import EXERCISES
from grader.paths import PACKAGE_DIR

#: Patterns in a learner's own code cells that have no business in an exercise.
SUSPICIOUS = {
    rf"\b{GRADING_DIR_ENV}\b": f"reads the grading folder variable {GRADING_DIR_ENV}",
    re.escape(RECORD_SUFFIX[1:]) + r"\b": f"touches the integrity records (*{RECORD_SUFFIX})",
    r"^\s*(?:from|import)\s+grader\b": "imports the grader package",
    r"\bsys\.modules\s*\[[^\]]*\]\s*=": "assigns into sys.modules",
    r"/proc\b": "reads /proc (other processes)",
    r"\bos\.kill(?:pg)?\b": "sends signals to other processes",
    r"\b(?:subprocess|os\.system|os\.fork|os\.spawn\w*|os\.exec\w*|multiprocessing|pty)\b":
        "starts processes",
    r"\bshutil\.rmtree\b|\bos\.(?:remove|unlink|rmdir)\b|\.unlink\(": "deletes files",
    r"(?<![\w.])[rbf]?['\"]/(?!dev/null)[A-Za-z_]": "uses absolute paths",
    r"\.__file__\b|\bfind_spec\b|\bimportlib\b": "looks up where modules are installed",
}
#: Exceptions a test cell raises for the learner's answer (anything else, raised from
#: inside grader/, is the grading machinery failing).
ANSWER_FAILURES = {"AssertionError", "CheckFailure", "ForbiddenCall", "NotAttempted",
                   "NotImplementedError", "KeyboardInterrupt"}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FRAME = re.compile(r'File "?([^":,]+?\.py)"?(?:, line |:)\d+')

#: Doors around the tripwires, in an exercise's solution cell: they find the reference by
#: another name, or switch off what watches for it (course.checking.forbidden).
DOORS = {
    r"\btorch\s*\.\s*ops\b": "calls PyTorch operators through torch.ops",
    r"\btorch\s*\.\s*_C\b": "reaches into torch._C",
    r"_python_dispatch|DisableTorchFunction|_disable_current_modes|__torch_(?:function|dispatch)__"
    r"|Torch(?:Function|Dispatch)Mode": "switches off or intercepts PyTorch's function dispatch",
    r"\bimportlib\b|\b__import__\b|\bgetattr\(\s*(?:torch|F|nn|functional)\b":
        "looks torch functions up by name",
    r"\bnn\s*\.\s*(?:MultiheadAttention|Transformer\w*)\b": "uses PyTorch's own attention modules",
}


def code_only(source: str) -> str:
    """``source`` with its comments dropped and every string literal emptied: what it runs, not
    what it says. Source Python cannot tokenize (a cell magic) is kept whole."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    replaced = {tokenize.COMMENT: "", tokenize.STRING: '""'}
    pieces, at = [], 0
    for token in tokens:
        if token.type in replaced:
            begin, end = (starts[row - 1] + col for row, col in (token.start, token.end))
            pieces += [source[at:begin], replaced[token.type]]
            at = end
    return "".join(pieces) + source[at:]


def reference_calls(source: str, exercise: str) -> list[str]:
    """What an exercise's solution cell says it calls among the references it is graded
    against (by attribute name: ``F.softmax``, ``x.softmax``, ``torch._softmax``) and the
    doors around the tripwires, read from its code (not its comments or strings); the runtime
    tripwires see the calls, this sees the code."""
    source = code_only(source)
    found = [what for pattern, what in DOORS.items() if re.search(pattern, source)]
    check = EXERCISES.get(exercise)
    names = {name.rsplit(".", 1)[-1].lstrip("_") for name in check.forbidden.functions} if check else ()
    for name in sorted(names):
        if re.search(rf"\.\s*_?{re.escape(name)}\b", source):
            found.append(f"calls {name}, which {exercise} is graded against")
    return found


@dataclass
class CellReport:
    """What the grader learned from a graded notebook's cells."""

    notes: list[str] = field(default_factory=list)  # things worth telling (timeouts, restores)
    errors: list[str] = field(default_factory=list)  # learner cells that raised
    suspicious: list[str] = field(default_factory=list)  # for review: flags the row
    failures: list[str] = field(default_factory=list)  # the grading machinery failed: regrade


def grader_failure(label: str, output) -> str | None:
    """Why a test cell's error is the grader's failure, not the answer's; None if it is not."""
    if output.ename in ANSWER_FAILURES:
        return None
    if output.ename in ("ModuleNotFoundError", "ImportError") and \
            re.search(r"\b(?:grader|course)\b", output.evalue):
        return f"{label} could not import the grading code ({output.ename}: {output.evalue[:120]})"
    frames = FRAME.findall(ANSI.sub("", "\n".join(output.get("traceback", []))))
    if frames and Path(frames[-1]).resolve().is_relative_to(PACKAGE_DIR):
        return f"the hidden check of {label} crashed ({output.ename}: {output.evalue[:120]})"
    return None


def cell_label(cell, code_number: int) -> str:
    """A learner's cell as the feedback page shows it: ``cell In [9]`` (its execution
    count); a cell that never ran by its place among the code cells."""
    count = cell.get("execution_count")
    return f"cell In [{count}]" if count else f"code cell {code_number} (In [ ])"


def describe_cells(path: Path, timeout: int) -> CellReport:
    """What the executed notebook says, for the report."""
    nb = nbformat.read(path, as_version=4)
    report = CellReport()
    notes, errors, suspicious = report.notes, report.errors, report.suspicious
    code_cells = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        code_cells += 1
        meta = cell.metadata.get("nbgrader", {})
        label = meta.get("grade_id") or cell_label(cell, code_cells)
        mark = cell.metadata.get(pre.MARK, {})
        if cell.source.startswith("# " + pre.RESTORED_NOTE.split("{")[0]):
            notes.append(f"test cell {label} was missing or had lost its metadata: restored")
        if mark.get("edited"):
            notes.append(f"read-only cell {label} had been edited: restored from the source")
        if mark.get("duplicate_of"):
            notes.append(f"test cell {mark['duplicate_of']} appears twice: the last copy was "
                         "graded, the other ran as a plain cell")
        timed_out = any(o.get("ename") == pre.TIMEOUT for o in cell.get("outputs", []))
        if mark.get("output_cut"):
            notes.append(f"{label} printed more than the grader keeps: its output was cut")
        for output in cell.get("outputs", []):
            if output.output_type != "error":
                continue
            if output.ename == pre.TIMEOUT:
                notes.append(f"{label} timed out after {timeout} s and was interrupted")
            elif output.ename in (pre.KERNEL_DIED, pre.KERNEL_UNRESPONSIVE):
                notes.append(f"{label}: {output.evalue}")
            elif output.ename == pre.NOT_RUN:
                notes.append(f"{label}: {output.evalue}")
                break
            elif meta.get("grade") and (failure := grader_failure(label, output)):
                report.failures.append(failure)
            elif not meta.get("grade") and not (timed_out and output.ename == "KeyboardInterrupt"):
                errors.append(f"{label} raised {output.ename}")
            if "Read-only file system" in output.get("evalue", ""):
                suspicious.append(f"{label} tried to write outside its own folder")
        if not meta.get("grade") and not meta.get("locked"):
            for pattern, what in SUSPICIOUS.items():
                if re.search(pattern, cell.source, flags=re.M):
                    suspicious.append(f"{label} {what}")
        if meta.get("solution") and not meta.get("grade"):
            suspicious += [f"{label} {what} (source scan)" for what in
                           reference_calls(cell.source, meta.get("grade_id", ""))]
    report.notes = list(dict.fromkeys(notes))
    report.suspicious = list(dict.fromkeys(suspicious))
    return report
