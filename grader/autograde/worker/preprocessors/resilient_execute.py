"""nbgrader's ``Execute`` that survives kernels dying or ignoring interrupts."""

from __future__ import annotations

import copy

from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Integer

from grader.autograde.worker.preprocessors.cell_marks import (
    KERNEL_DIED,
    KERNEL_UNRESPONSIVE,
    MARK,
    NOT_RUN,
    OUTPUT_CUT,
    TIMEOUT,
    error_output,
)


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
                self._lost(self.nb.cells[index], KERNEL_DIED,
                           f"the kernel died while running this cell ({self._exit_status()}); "
                           "later cells ran in a fresh kernel")
                return index + 1
            except CellTimeoutError:
                self._lost(self.nb.cells[index], KERNEL_UNRESPONSIVE,
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

    @classmethod
    def _lost(cls, cell: NotebookNode, ename: str, evalue: str) -> None:
        """Mark a cell whose kernel died or stopped answering. Whether its execution count arrived
        before that is a race, so it is dropped: the cell is named by its place, the same every run."""
        cell["execution_count"] = None
        cls._mark(cell, ename, evalue)

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
