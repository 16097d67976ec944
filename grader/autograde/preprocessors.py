"""nbgrader's preprocessors, made robust for a whole class.

Swapped in through configuration (:func:`grader.autograde.nbgrader_runs.course_config`):

* :class:`RestoreCells` (an ``OverwriteCells``): puts back test cells that were deleted or
  lost their nbgrader metadata, and repairs edited metadata, before nbgrader restores the
  hidden tests from the instructor source;
* :class:`ResilientExecute` (an ``Execute``): a cell that kills the kernel (``os._exit``,
  a segfault) or ignores the timeout's interrupt is marked with an error, and the rest of
  the notebook runs in a fresh kernel after the earlier cells are replayed; an output
  flood is cut off while it arrives;
* :class:`SaveAutoGradesIgnoringStderr`: warnings on stderr cost no points (stock nbgrader
  gives a grade cell 0 when it wrote anything to stderr);
* :class:`MarkDuplicates`: a ``DeduplicateIds`` that marks the copies it demotes.

The marks they leave in cell metadata (:data:`MARK`) are read back by
:mod:`grader.autograde.cells` for the grader's notes.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import DeduplicateIds, Execute, OverwriteCells, SaveAutoGrades
from traitlets import Integer, Unicode

from grader.publish import setup_cell

#: ``ename`` of the error outputs this module adds to cells; feedback and reports read them.
KERNEL_DIED = "KernelDied"
KERNEL_UNRESPONSIVE = "KernelUnresponsive"
NOT_RUN = "NotRun"
TIMEOUT = "CellTimeoutError"  # nbgrader's own, see Execute.error_on_timeout
OUTPUT_CUT = "[... the grader cut this output here: more than {} characters ...]\n"
RESTORED_NOTE = ("This test cell (id:{cell_id}) was missing from the submission or had lost "
                 "its metadata; the grader put it back.\n\n")


def error_output(ename: str, evalue: str) -> NotebookNode:
    """An error output as the kernel would produce it."""
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                  traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])


MARK = "course_grader"  # cell metadata this module adds, read back by the worker's report
HIDDEN_TESTS = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?",
                          re.S | re.M)


def as_released(source: str) -> str:
    """A read-only cell as the learner received it: hidden tests removed, spaces normalised,
    and the set-up cell's repository and branch as any student release may have set them."""
    text = setup_cell.neutral(HIDDEN_TESTS.sub("", source))
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


class MarkDuplicates(DeduplicateIds):
    """``DeduplicateIds`` that leaves a mark on the copies it demotes to plain cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if grade_id and not cell.metadata.get("nbgrader"):
            cell.metadata[MARK] = {"duplicate_of": grade_id}
        return cell, resources


class RestoreCells(OverwriteCells):
    """``OverwriteCells`` that repairs test cells before restoring them from the source.

    * A cell whose nbgrader ``grade_id`` is known gets the source notebook's nbgrader
      metadata back (edited ``points``, ``grade`` or ``locked`` flags cannot crash or
      cheat the grading).
    * A grade cell missing from the submission (deleted, or stripped of its metadata) is
      inserted after the nearest earlier instructor cell that is present, marked with a
      note, and then restored like any other grade cell.
    """

    source_notebook = Unicode("", help="The instructor notebook being graded.").tag(config=True)

    def _source_cells(self) -> list[NotebookNode]:
        folder = Path(self.source_notebook)
        path = folder / f"{self.notebook_id}.ipynb" if folder.is_dir() else folder
        nb = nbformat.read(path, as_version=4)
        return [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")]

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        source = {c.metadata.nbgrader["grade_id"]: c for c in self._source_cells()}
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in source:
                original = source[grade_id]
                if original.metadata.nbgrader.get("locked") and \
                        as_released(cell.source) != as_released(original.source):
                    cell.metadata[MARK] = {"edited": True}
                cell.metadata["nbgrader"] = copy.deepcopy(original.metadata.nbgrader)
            else:  # unknown, or a duplicate DeduplicateIds emptied: a plain cell
                cell.metadata.pop("nbgrader", None)
        self.missing_cell_notification = RESTORED_NOTE
        self.add_missing_cells = True
        return super().preprocess(nb, resources)

    def add_missing_grade_cells(self, nb, resources):
        """Insert missing grade cells in instructor order, whatever else is missing."""
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        stored = {cell.name: cell for cell in source_nb.source_cells}
        grade_cells = {cell.name: cell for cell in source_nb.grade_cells}
        solutions = {cell.name for cell in source_nb.solution_cells}
        order = [c.metadata.nbgrader["grade_id"] for c in self._source_cells()]
        for position, grade_id in enumerate(order):
            if grade_id not in grade_cells or self._index(nb, grade_id) is not None:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_id)
            cell = self.missing_cell_transform(stored[grade_id], grade_cells[grade_id].max_score,
                                               is_solution=grade_id in solutions)
            anchors = [self._index(nb, earlier) for earlier in reversed(order[:position])]
            anchor = next((i for i in anchors if i is not None), -1)
            nb.cells.insert(anchor + 1, cell)
        return nb, resources

    @staticmethod
    def _index(nb: NotebookNode, grade_id: str) -> int | None:
        for index, cell in enumerate(nb.cells):
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return index
        return None


class ResilientExecute(Execute):
    """nbgrader's ``Execute`` that survives kernels dying or ignoring interrupts.

    When the kernel dies in a cell (or ignores the interrupt after a timeout), that cell
    gets an error output saying so, a fresh kernel replays the earlier non-test cells, and
    execution goes on with the next cell. After ``max_restarts`` restarts the remaining
    cells are marked as not run. Stream output beyond ``max_output_chars`` per cell is
    dropped as it arrives.
    """

    max_restarts = Integer(3, help="Fresh kernels allowed per notebook.").tag(config=True)
    interrupt_grace = Integer(10, help="Seconds a kernel has to answer after an interrupt."
                              ).tag(config=True)
    max_output_chars = Integer(1_000_000, help="Stream characters kept per cell.").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        self._stream_chars: dict[int, int] = {}
        replay: list[int] = []
        start, restarts = 0, 0
        while start < len(self.nb.cells):
            start = self._run_from(start, replay, resources)
            if start < len(self.nb.cells):
                restarts += 1
                if restarts > self.max_restarts:
                    self._give_up(start)
                    break
        self.set_widgets_metadata()
        return self.nb, self.resources

    def _run_from(self, start: int, replay: list[int], resources) -> int:
        """Run cells from ``start`` in a new kernel; return where the next kernel continues."""
        index = start
        with self.setup_kernel():
            info = self.wait_for_reply(self.kc.kernel_info())
            self.nb.metadata["language_info"] = info["content"]["language_info"]
            try:
                for earlier in replay:
                    self._replay(earlier)
            except (DeadKernelError, CellTimeoutError):
                return start  # the replay itself failed: counts as a restart
            try:
                for index in range(start, len(self.nb.cells)):
                    cell = self.nb.cells[index]
                    self.preprocess_cell(cell, resources, index)
                    if self._timed_out(cell) and not self._responsive():
                        self._mark(cell, KERNEL_UNRESPONSIVE,
                                   f"this cell ran longer than {self.timeout} s and the kernel "
                                   "ignored the interrupt; later cells ran in a fresh kernel")
                        return index + 1
                    if cell.cell_type == "code" and not utils.is_grade(cell):
                        replay.append(index)
            except DeadKernelError:
                self._mark(self.nb.cells[index], KERNEL_DIED,
                           f"the kernel died while running this cell ({self._exit_status()}); "
                           "later cells ran in a fresh kernel")
                return index + 1
            except CellTimeoutError:
                self._mark(self.nb.cells[index], KERNEL_UNRESPONSIVE,
                           "the kernel stopped answering while running this cell; later cells "
                           "ran in a fresh kernel")
                return index + 1
        return len(self.nb.cells)

    def _replay(self, index: int) -> None:
        """Run an earlier cell again in the new kernel; its recorded outputs stay as they were."""
        original = self.nb.cells[index]
        try:
            self.execute_cell(copy.deepcopy(original), index, store_history=False)
        finally:
            self.nb.cells[index] = original

    def _give_up(self, start: int) -> None:
        for cell in self.nb.cells[start:]:
            if cell.cell_type == "code" and cell.source.strip():
                cell.outputs = [error_output(NOT_RUN, "not run: the kernel died "
                                             f"{self.max_restarts + 1} times in this notebook")]

    @staticmethod
    def _timed_out(cell: NotebookNode) -> bool:
        return any(o.get("ename") == TIMEOUT for o in cell.get("outputs", []))

    def _responsive(self) -> bool:
        """Whether the kernel answers a kernel_info request within ``interrupt_grace``."""
        saved = self.timeout
        self.timeout = self.interrupt_grace
        try:
            return self.wait_for_reply(self.kc.kernel_info()) is not None
        except (DeadKernelError, CellTimeoutError):
            return False
        finally:
            self.timeout = saved

    def _exit_status(self) -> str:
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return "exit status unknown"
        import signal

        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        if code - 128 in signal.valid_signals():  # bubblewrap passes a signal on as 128 + N
            return f"killed by {signal.Signals(code - 128).name} (exit code {code})"
        return f"exit code {code}"

    @staticmethod
    def _mark(cell: NotebookNode, ename: str, evalue: str) -> None:
        cell.setdefault("outputs", []).append(error_output(ename, evalue))

    def output(self, outs, msg, display_id, cell_index):
        """Keep at most ``max_output_chars`` of stream text per cell."""
        if msg["msg_type"] == "stream":
            used = self._stream_chars.get(cell_index, 0)
            text = msg["content"].get("text", "")
            self._stream_chars[cell_index] = used + len(text)
            if used >= self.max_output_chars:
                return None
            if used + len(text) > self.max_output_chars:
                self.nb.cells[cell_index].metadata.setdefault(MARK, {})["output_cut"] = True
                msg = copy.deepcopy(msg)
                msg["content"]["text"] = text[: self.max_output_chars - used] + \
                    OUTPUT_CUT.format(self.max_output_chars)
        return super().output(outs, msg, display_id, cell_index)


class SaveAutoGradesIgnoringStderr(SaveAutoGrades):
    """``SaveAutoGrades`` where text on stderr (warnings) does not zero a grade cell."""

    def _add_score(self, cell, resources):
        shown = cell.outputs
        cell.outputs = [o for o in shown if not (o.output_type == "stream" and o.name == "stderr")]
        try:
            super()._add_score(cell, resources)
        finally:
            cell.outputs = shown
