"""Planted submissions of 10.1 for the autograde tests: one student per way to go wrong.

Every entry builds one student's folder (``<student>/10.1-self-attention/...``) from the
solved notebook (:func:`samples.solved`). The learner code in them is written here,
independently of the grader. 10.1 has two exercises: ``qkv_projections`` (2 points) and
``QKVProjection`` (2 points).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

import nbformat

import samples

ASSIGNMENT = "10.1-self-attention"
DEADLINE = "2026-12-01T23:59:00+00:00"
ON_TIME = "2026-12-01 20:00:00.000000 UTC"
LATE = "2026-12-02 01:30:00.000000 UTC"  # 91 minutes after the deadline

WRONG_QKV = '''
def qkv_projections(X, W_q, W_k, W_v):
    return X @ W_q, X @ W_q, X @ W_v   # K uses W_q: wrong
'''
SUBTLY_WRONG_QKV = '''
def qkv_projections(X, W_q, W_k, W_v):
    if W_v.shape[1] == 7:                 # wrong only in a case the visible test does not try
        return X @ W_q, X @ W_q, X @ W_v
    return X @ W_q, X @ W_k, X @ W_v
'''
WRONG_MODULE = '''
class QKVProjection(nn.Module):
    def __init__(self, d_model, d_k, d_v):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_k, bias=False)
        self.w_k = nn.Linear(d_model, d_k, bias=False)
        self.w_v = nn.Linear(d_model, d_v, bias=False)

    def forward(self, x):
        return self.w_q(x), self.w_q(x), self.w_v(x)   # K from w_q: wrong
'''


def solved():
    return samples.solved(ASSIGNMENT)


def write(root: Path, student: str, nb, **kwargs) -> None:
    samples.write(nb, root, student, ASSIGNMENT, **kwargs)


def with_cell(after: str, source: str):
    return samples.insert_cell(solved(), after, source)


def replace(grade_id: str, source: str, nb=None):
    return samples.plant(nb or solved(), grade_id, source, append=False)


def drop_cell(nb, grade_id: str):
    nb = copy.deepcopy(nb)
    del nb.cells[samples.cell_index(nb, grade_id)]
    return nb


def strip_metadata(nb, grade_id: str, source: str | None = None):
    nb = copy.deepcopy(nb)
    cell = nb.cells[samples.cell_index(nb, grade_id)]
    cell.metadata.pop("nbgrader")
    if source is not None:
        cell.source = source
    return nb


def edit_test(nb, grade_id: str, source: str, points: int = 100):
    nb = copy.deepcopy(nb)
    cell = nb.cells[samples.cell_index(nb, grade_id)]
    cell.source = source
    cell.metadata.nbgrader["points"] = points
    return nb


def paste_twice(nb, grade_id: str):
    """Copy and paste in Jupyter: the same cell (nbgrader metadata too) with a new cell id."""
    nb = copy.deepcopy(nb)
    pasted = copy.deepcopy(nb.cells[samples.cell_index(nb, grade_id)])
    pasted["id"] = "pasted-" + grade_id
    nb.cells.append(pasted)
    return nb


# ---------------------------------------------------------------- the catalogue

Builder = Callable[[Path, str], None]

PLANTED: dict[str, Builder] = {
    # correct work, on time and late
    "correct": lambda r, s: write(r, s, solved(), timestamp=ON_TIME),
    "late": lambda r, s: write(r, s, solved(), timestamp=LATE),
    "wrong-qkv": lambda r, s: write(r, s, replace("qkv_projections", WRONG_QKV)),
    # runaway code
    "infinite-loop": lambda r, s: write(r, s, with_cell("setup", "while True:\n    pass")),
    "ignores-interrupt": lambda r, s: write(r, s, with_cell(
        "check_qkv_projections",
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass")),
    "os-exit": lambda r, s: write(r, s, with_cell("check_qkv_projections",
                                                  "import os\nos._exit(3)")),
    "segfault": lambda r, s: write(r, s, samples.plant(
        solved(), "QKVProjection",
        "_forward = QKVProjection.forward\n"
        "def _crash(self, x):\n    import ctypes\n    ctypes.string_at(0)\n"
        "QKVProjection.forward = _crash")),
    "kills-grader": lambda r, s: write(r, s, with_cell(
        "check_qkv_projections", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")),
    # 3 GB at once, more than the grading limit (2500 MB in the tests) allows: refused with
    # MemoryError. (A loop that hoards 100 MB blocks until refused leaves the kernel with
    # almost no memory, and whether a later cell can still draw a figure is luck.)
    "memory-bomb": lambda r, s: write(r, s, with_cell(
        "setup", "weights = bytearray(3 * 2**30)  # the n x n weights of a very long sequence")),
    "output-flood": lambda r, s: write(r, s, with_cell(
        "setup", "print('\\n'.join(f'line {i}' for i in range(3_000_000)))")),
    # ordinary learner errors
    "syntax-error": lambda r, s: write(r, s, samples.plant(solved(), "QKVProjection",
                                                           "def broken(:\n    pass")),
    "exception-outside": lambda r, s: write(r, s, with_cell(
        "setup", "raise ValueError('a learner experiment went wrong')")),
    "stderr-warnings": lambda r, s: write(r, s, samples.plant(
        solved(), "qkv_projections",
        "import sys, warnings\n_qkv = qkv_projections\n"
        "def qkv_projections(X, W_q, W_k, W_v):\n"
        "    warnings.warn('this is slow', RuntimeWarning)\n"
        "    print('debug: called', file=sys.stderr)\n"
        "    return _qkv(X, W_q, W_k, W_v)")),
    # test cells tampered with
    "test-deleted": lambda r, s: write(r, s, drop_cell(
        replace("qkv_projections", WRONG_QKV), "check_qkv_projections")),
    "test-edited": lambda r, s: write(r, s, edit_test(
        replace("QKVProjection", WRONG_MODULE), "check_QKVProjection", "print('all good')")),
    "test-stripped": lambda r, s: write(r, s, strip_metadata(
        replace("qkv_projections", WRONG_QKV), "check_qkv_projections", "print('fine')")),
    "test-pasted-twice": lambda r, s: write(r, s, paste_twice(solved(), "check_qkv_projections")),
    # cannot be graded at all
    "invalid-json": lambda r, s: write(r, s, json.dumps(nbformat.writes(solved()))[:-400]),
    "wrong-name": lambda r, s: write(r, s, solved(), name="self_attention (1).ipynb"),
    "two-names": lambda r, s: (write(r, s, solved(), name="Untitled.ipynb"),
                               write(r, s, solved(), name="Untitled1.ipynb")),
    "copy1": lambda r, s: (write(r, s, solved()), write(r, s, solved(), name="self_attention-Copy1.ipynb")),
    "missing-notebook": lambda r, s: (r / s / ASSIGNMENT).mkdir(parents=True) or
    (r / s / ASSIGNMENT / "notes.txt").write_text("I ran out of time"),
    "empty-folder": lambda r, s: (r / s / ASSIGNMENT).mkdir(parents=True),
    "empty-student": lambda r, s: (r / s).mkdir(parents=True),
    # cheats: wrong answers plus a trick that would hide them
    "cheat-allclose": lambda r, s: write(r, s, samples.insert_cell(
        replace("qkv_projections", SUBTLY_WRONG_QKV), "setup",
        "import torch\ntorch.allclose = lambda *args, **kwargs: True\n"
        "torch.testing.assert_close = lambda *args, **kwargs: None")),
    "cheat-numpy": lambda r, s: write(r, s, samples.insert_cell(
        replace("qkv_projections", SUBTLY_WRONG_QKV), "setup",
        "import numpy.testing\nnumpy.testing.assert_allclose = lambda *args, **kwargs: None")),
    "cheat-fake-grader": lambda r, s: write(r, s, samples.insert_cell(
        replace("qkv_projections", SUBTLY_WRONG_QKV), "setup",
        "import sys, types\nimport grader.checks\n"
        "fake = types.ModuleType('grader.checks.s10_1')\n"
        "fake.check_qkv_projections = fake.check_QKVProjection = lambda impl: None\n"
        "sys.modules['grader.checks.s10_1'] = grader.checks.s10_1 = fake")),
    "cheat-edit-checks": lambda r, s: write(r, s, samples.insert_cell(
        replace("qkv_projections", SUBTLY_WRONG_QKV), "setup",
        "from grader.checks import exercise\n"
        "exercise.GradedExercise.evaluate = lambda self, case, got, device: None")),
    "cheat-skip-check": lambda r, s: write(r, s, samples.insert_cell(
        replace("qkv_projections", SUBTLY_WRONG_QKV), "setup",
        "from grader.checks import s10_1\ns10_1.check_qkv_projections = lambda impl: None")),
    "cheat-reference": lambda r, s: write(r, s, replace(
        "qkv_projections",
        "import torch.nn.functional as F\n"
        "def qkv_projections(X, W_q, W_k, W_v):\n"
        "    return tuple(F.linear(X, W.T) for W in (W_q, W_k, W_v))")),
}


# ---------------------------------------------------------------- hostile submissions

#: Every honest notebook carries this line; no hostile output may ever show it.
SECRET = "SECRET-OF-AN-HONEST-STUDENT-7f3a"
#: A hostile process started by a kernel carries this in its command line.
ORPHAN = "hostile-orphan-7f3a"

HOSTILE_CELLS = {
    # rewrite the hidden checks so that everyone graded later gets 0
    "rewrites-checks": """
import importlib.util
try:
    path = importlib.util.find_spec("grader.checks.s10_1").origin
    with open(path, "a") as source:
        source.write("\\ndef check_qkv_projections(impl):\\n    raise AssertionError('0 for all')\\n")
except Exception as error:
    print("could not:", type(error).__name__)
""",
    # break the course helpers: every visible test fails for everyone later
    "rewrites-course": """
import course.checking.failure
try:
    with open(course.checking.failure.__file__, "w") as source:
        source.write("raise ImportError('the course is gone')\\n")
except Exception as error:
    print("could not:", type(error).__name__)
""",
    # find the output folder from the grader's command line, wipe it, forge a grade
    "deletes-results": """
import glob, json, os, shutil
for cmdline in glob.glob("/proc/*/cmdline"):
    try:
        words = open(cmdline, "rb").read().decode(errors="replace").split("\\0")
    except OSError:
        continue
    if "--out" in words:
        out = words[words.index("--out") + 1]
        shutil.rmtree(os.path.join(out, "results"), ignore_errors=True)
        try:
            os.remove(os.path.join(out, "grades.csv"))
        except OSError:
            pass
for folder in glob.glob("/tmp/*/graded*") + glob.glob("/tmp/pytest-of-*/*/graded*"):
    shutil.rmtree(folder, ignore_errors=True)
print("searched")
""",
    # read other students' notebooks, from the filesystem and through /proc
    "reads-others": f"""
import glob, os
found = []
for pattern in ("/tmp/**/*.ipynb", "/work/**/*.ipynb", "/root/**/*.ipynb", "/proc/*/cwd/*.ipynb"):
    for path in glob.glob(pattern, recursive=True):
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        secret = "{SECRET[:10]}" + "{SECRET[10:]}"  # not whole in its own notebook
        if secret in text:
            found.append(path)
print("found:", found)
""",
    # write outside its own folder: the repository, the grader's home, shared /tmp
    "writes-outside": """
import os, pathlib
written = []
for place in ("/tmp/hostile-was-here", "/var/tmp/hostile-was-here", "/root/hostile-was-here",
              os.path.join(os.getcwd(), "..", "..", "..", "hostile-was-here")):
    try:
        pathlib.Path(place).write_text("x")
        written.append(place)
    except OSError:
        pass
import grader
try:
    pathlib.Path(os.path.dirname(grader.__file__), "..", "hostile-was-here").write_text("x")
except OSError:
    pass
print("written:", written)
""",
    # fill the disk of /tmp
    "fills-tmp": """
written = 0
try:
    with open("/tmp/filler", "wb") as filler:
        while written < 20 * 2**30:
            filler.write(b"0" * 2**24)
            written += 2**24
except OSError as error:
    print("stopped after", written // 2**20, "MB:", type(error).__name__)
""",
    # leave a process behind that outlives the kernel and strikes later
    "leaves-orphan": f"""
import subprocess, sys
code = "import time; time.sleep(60); open('/tmp/{ORPHAN}', 'w').write('still here')"
subprocess.Popen([sys.executable, "-c", code, "{ORPHAN}"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("started")
""",
}

#: Hostile students, named to be graded first; the code of each runs right after the set-up.
HOSTILE = {f"0-{name}": source for name, source in HOSTILE_CELLS.items()}


def honest(nb):
    """``nb`` with the secret line no other student may ever read."""
    return samples.insert_cell(nb, "setup", f"# {SECRET}")


PLANTED.update({student: (lambda source: lambda r, s: write(r, s, with_cell("setup", source)))(code)
                for student, code in HOSTILE.items()})
PLANTED["correct"] = lambda r, s: write(r, s, honest(solved()), timestamp=ON_TIME)
PLANTED["late"] = lambda r, s: write(r, s, honest(solved()), timestamp=LATE)


def build(root: Path, names: list[str] | None = None) -> Path:
    """Write the planted submissions (all, or ``names``) under ``root``."""
    for name in names or PLANTED:
        PLANTED[name](root, name)
    return root
