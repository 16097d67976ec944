"""ResilientExecute (grader/autograde/worker/preprocessors/resilient_execute.py), the parts
that need no kernel: cutting an output flood, giving up, reading an exit status. Cells
that kill their kernel are graded end to end in tests/test_autograde.py (slow)."""

from __future__ import annotations

import signal
from types import SimpleNamespace

from nbclient.client import NotebookClient

from grader.autograde.worker.preprocessors.cell_marks import MARK, NOT_RUN, OUTPUT_CUT
from grader.autograde.worker.preprocessors.resilient_execute import ResilientExecute


def executor(nb, **traits) -> ResilientExecute:
    """The preprocessor as ``preprocess`` sets it up, before it starts a kernel."""
    ex = ResilientExecute(**traits)
    NotebookClient.__init__(ex, nb)
    ex.reset_execution_trackers()
    ex.clear_before_next_output = False
    ex._stream_chars = {}
    return ex


def stream(text: str) -> dict:
    return {"msg_type": "stream", "parent_header": {"msg_id": "m"}, "header": {"msg_type": "stream"},
            "content": {"name": "stdout", "text": text}}


def test_an_output_flood_is_cut_where_it_passes_the_limit(read_notebook):
    """Is stream text kept up to ``max_output_chars`` per cell, the rest dropped as it
    arrives, with a line saying so and a mark for the report?"""
    nb = read_notebook("submitted-unchanged.ipynb")
    ex = executor(nb, max_output_chars=10)
    outs: list = []
    for _ in range(4):
        ex.output(outs, stream("abcdef"), None, 2)
    text = "".join(o["text"] for o in outs)
    assert text == "abcdefabcd" + OUTPUT_CUT.format(10)
    assert nb.cells[2].metadata[MARK] == {"output_cut": True}


def test_after_too_many_restarts_the_rest_is_marked_not_run(read_notebook):
    """When the kernel died too often, is every later code cell marked as not run (and
    markdown left alone)?"""
    nb = read_notebook("submitted-unchanged.ipynb")
    executor(nb, max_restarts=3)._give_up(2)
    marked = [i for i, c in enumerate(nb.cells)
              if any(o.get("ename") == NOT_RUN for o in c.get("outputs", []))]
    assert marked == [2, 3, 4, 5]
    assert "died 4 times" in nb.cells[2].outputs[-1]["evalue"]


def test_exit_status_names_the_signal(read_notebook):
    """Does the note say which signal killed the kernel, also through bubblewrap (128 + N)?"""
    ex = executor(read_notebook("submitted-unchanged.ipynb"))
    for code, said in ((-signal.SIGKILL, "killed by SIGKILL"), (128 + signal.SIGSEGV, "killed by SIGSEGV"),
                       (3, "exit code 3"), (None, "exit status unknown")):
        ex.km = SimpleNamespace(provisioner=SimpleNamespace(process=SimpleNamespace(poll=lambda c=code: c)))
        assert ex._exit_status().startswith(said)
