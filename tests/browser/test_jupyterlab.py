"""Learners everywhere: a learner notebook run in a real JupyterLab in headless Chromium.

The test copies a learner notebook into a temporary root directory and fills its FIRST
exercise cell with a deliberately wrong but runnable answer by editing the copy's JSON
before the browser opens it (a learner notebook otherwise stops at the first
``NotImplementedError``). The visible test after that exercise gets JupyterLab's
``raises-exception`` tag in the copy, so Run All goes on past its (expected) failure to
the figures below it, up to the next unfinished exercise. It then clicks
Run > Run All Cells and checks what a learner would see: a matplotlib figure (an ``<img>``
from ``image/png``) and the helpful message of the visible test after the exercise.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
LabServer = Any  # conftest.LabServer: .url, .token, .root_dir, .log, .lab_url(path)

RUN_TIMEOUT_MS = 180_000
UI_TIMEOUT_MS = 60_000
#: A failed check as a learner sees it: the toolkit's "✗ message" alone, or a traceback's last line.
FAILED_CHECK = re.compile(r"^\s*(AssertionError:|\w*CheckFailure:|✗)\s*(\S.*)$", re.MULTILINE)
RAISE_TODO = re.compile(r"^(?P<indent>[ \t]*)raise NotImplementedError.*$", re.MULTILINE)


@dataclass(frozen=True)
class Case:
    """A learner notebook, the wrong answer for its first ``raise``, and the message expected."""

    name: str
    notebook: Path | None  # None: the synthetic notebook made by synthetic_notebook()
    wrong_answer: str
    message: str  # part of the visible test's message that the wrong answer must show


CASES = [
    Case(
        "synthetic",
        None,
        "return x + 0  # deliberately wrong: should double x",
        "should return twice its input",
    ),
    Case(
        "10.1",
        Path("notebooks/10.1-self-attention/self_attention.ipynb"),
        "return X @ W_k, X @ W_q, X @ W_v  # deliberately wrong: Q and K swapped",
        "This looks like W_q and W_k swapped",
    ),
    Case(  # the optional last notebook: a release --through 10.8 runs in the browser too
        "10.8",
        Path("notebooks/10.8-decoding/decoding.ipynb"),
        "return greedy_decode(model, src, bos_id, eos_id, max_len)  # deliberately wrong: no cache",
        "should process only the newest position",
    ),
    Case(
        "10.7",
        Path("notebooks/10.7-gpt/gpt.ipynb"),
        "self.tok_embed = nn.Embedding(vocab_size, d_model)\n"
        "self.pos_embed = nn.Embedding(max_len, d_model)\n"
        "self.blocks = nn.ModuleList(\n"
        "    TransformerBlock(d_model, num_heads, d_ff, dropout, 'gelu', norm_first=True)\n"
        "    for _ in range(num_layers))\n"
        "self.norm = nn.LayerNorm(d_model)\n"
        "self.lm_head = nn.Linear(d_model, vocab_size, bias=False)  # deliberately wrong: not tied",
        "This looks like an output layer with its own weight",
    ),
]


def synthetic_notebook(path: Path) -> Path:
    """Write a small learner-shaped notebook: a figure, an exercise, its visible test."""

    def cell(kind: str, source: str, **nbgrader: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": source}
        if nbgrader:
            body["metadata"]["nbgrader"] = {"schema_version": 3, "locked": False, **nbgrader}
        if kind == "code":
            body.update(outputs=[], execution_count=None)
        return body

    cells = [
        cell("markdown", "# A synthetic learner notebook\nSame shape as the course's."),
        cell(
            "code",
            "import matplotlib.pyplot as plt\nimport torch\n\n"
            "fig, ax = plt.subplots(figsize=(4, 3))\n"
            "ax.imshow(torch.softmax(torch.randn(4, 4), dim=-1))\n"
            "ax.set_title('attention weights')\nplt.show()",
        ),
        cell(
            "code",
            'def double(x):\n    """Return 2 * x."""\n    # YOUR CODE HERE\n'
            "    raise NotImplementedError()",
            grade=False,
            solution=True,
            grade_id="double",
            task=False,
        ),
        cell(
            "code",
            "x = torch.arange(3.0)\nassert torch.equal(double(x), 2 * x), (\n"
            "    'double(x) should return twice its input: for [0, 1, 2] the entries differ.')\n"
            "print('ok')",
            grade=True,
            solution=False,
            locked=True,
            points=1,
            grade_id="test_double",
            task=False,
        ),
    ]
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


def is_exercise(cell: dict[str, Any]) -> bool:
    """Is this a code cell the learner must fill in (nbgrader solution, still unanswered)?"""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    source = "".join(cell.get("source", ""))
    return (
        cell["cell_type"] == "code"
        and bool(RAISE_TODO.search(source))
        and (meta.get("solution", True) and not meta.get("grade", False))
    )


def fill_first_exercise(path: Path, wrong_answer: str) -> int:
    """Put ``wrong_answer`` in place of the first exercise's ``raise``; return its cell index."""
    nb = json.loads(path.read_text())
    index = next((i for i, c in enumerate(nb["cells"]) if is_exercise(c)), None)
    assert index is not None, f"{path.name} has no exercise cell raising NotImplementedError"
    cell = nb["cells"][index]
    source = "".join(cell["source"])

    def indented(match: re.Match[str]) -> str:
        return "\n".join(match["indent"] + line for line in wrong_answer.splitlines())

    cell["source"] = RAISE_TODO.sub(indented, source, count=1)
    path.write_text(json.dumps(nb, indent=1))
    return index


def tag_visible_test(path: Path, exercise: int) -> int:
    """Tag the first code cell after the exercise ``raises-exception``; return its index."""
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    index = next(i for i in range(exercise + 1, len(cells)) if cells[i]["cell_type"] == "code")
    tags = cells[index]["metadata"].setdefault("tags", [])
    tags.append("raises-exception")
    path.write_text(json.dumps(nb, indent=1))
    return index


def prepare_copy(case: Case, root: Path) -> tuple[Path, int]:
    """Copy the case's notebook into ``root``, fill its first exercise; return (copy, test cell)."""
    root.mkdir(parents=True, exist_ok=True)
    if case.notebook is None:
        copy = synthetic_notebook(root / "synthetic.ipynb")
    else:
        source = REPO / case.notebook
        if not source.exists():
            pytest.fail(f"{case.notebook} is missing: update CASES if it moved")
        copy = root / source.name
        shutil.copy(source, copy)
    exercise = fill_first_exercise(copy, case.wrong_answer)
    return copy, tag_visible_test(copy, exercise)


def open_notebook(page: Any, server: LabServer, name: str) -> None:
    """Open the notebook in JupyterLab and wait until its kernel is idle."""
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(server.lab_url(name))
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for()
    wait_kernel_idle(page)


KERNEL_IDLE_JS = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const kernel = panel && panel.sessionContext && panel.sessionContext.session
        && panel.sessionContext.session.kernel;
    const prompts = [...panel.node.querySelectorAll('.jp-Notebook .jp-InputPrompt')];
    return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'
        && !prompts.some(p => p.textContent.includes('*'));
}"""


def wait_kernel_idle(page: Any, timeout_ms: int = UI_TIMEOUT_MS) -> None:
    """Wait until the notebook's kernel is connected and idle, and no cell is queued (``[*]``)."""
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout_ms)


def run_all_cells(page: Any) -> None:
    """Click Run > Run All Cells in the menu bar, as a learner would."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator('#jp-mainmenu-run .lm-Menu-item[data-command="runmenu:run-all"]').click()


def wait_run_finished(page: Any) -> None:
    """Wait until a cell has run, then until the kernel is idle with nothing queued."""
    page.locator(".jp-Notebook .jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).first.wait_for()
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    for _ in range(2):  # idle twice, a second apart: the kernel idles briefly between cells
        wait_kernel_idle(page, timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
        page.wait_for_timeout(1000)


def rendered_figures(page: Any) -> Any:
    """The ``<img>`` outputs rendered from ``image/png`` data."""
    return page.locator('.jp-OutputArea-output[data-mime-type="image/png"] img')


def cell_output_text(page: Any, index: int) -> str:
    """The visible text of the outputs of notebook cell ``index``."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    return cell.locator(".jp-OutputArea").inner_text()


def save_screenshot(page: Any, path: Path, test_cell: int) -> None:
    """Scroll the failing test to the top (a figure is usually just below); save a PNG."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(test_cell)
    cell.evaluate("cell => cell.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_run_all_shows_figure_and_test_message(
    case: Case,
    lab_server: Callable[[Path], LabServer],
    chromium_page: Any,
    output_dir: Path,
    tmp_path: Path,
) -> None:
    """Does Run All show a learner the figure and the visible test's helpful message?"""
    started = time.monotonic()
    copy, test_cell = prepare_copy(case, tmp_path / "root")
    server = lab_server(copy.parent)
    open_notebook(chromium_page, server, copy.name)
    run_all_cells(chromium_page)
    wait_run_finished(chromium_page)

    figures = rendered_figures(chromium_page)
    assert figures.count() >= 1, "no matplotlib figure (image/png <img>) was rendered"
    figures.first.wait_for(state="visible")
    width = figures.first.evaluate("img => img.naturalWidth")
    assert width > 0, "the figure's <img> has no decoded image"

    text = cell_output_text(chromium_page, test_cell)
    match = FAILED_CHECK.search(text)
    assert match, f"cell {test_cell} (the first visible test) shows no failing check:\n{text}"
    shown = text[match.start(2):]  # the message and the hint on the lines after it
    assert case.message in shown, f"unexpected message {shown!r}, wanted {case.message!r}"
    save_screenshot(chromium_page, output_dir / f"jupyterlab-{case.name}.png", test_cell)
    print(f"[{case.name}] message: {match[0]!r}; took {time.monotonic() - started:.1f}s")


def test_nbgrader_extensions_enabled() -> None:
    """Are nbgrader's formgrader and validate extensions enabled for the server and for Lab?"""
    server, lab = jupyter([["server", "extension", "list"], ["labextension", "list"]])
    for name in ("formgrader", "validate_assignment"):
        assert re.search(rf"nbgrader\.server_extensions\.{name}\s+enabled", server), server
        assert re.search(rf"nbgrader\.server_extensions\.{name}\s+OK", server), server
    assert re.search(r"@jupyter/nbgrader v\S+\s+enabled\s+OK", lab), lab
    disabled = lab.split("Disabled extensions:")[1] if "Disabled extensions:" in lab else ""
    assert "nbgrader" not in disabled, f"some nbgrader lab plugins are disabled:\n{disabled}"


def jupyter(commands: list[list[str]]) -> list[str]:
    """Run ``jupyter`` subcommands side by side; each one's stdout+stderr without colours."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "jupyter", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in commands
    ]
    outputs = []
    for args, process in zip(commands, processes, strict=True):
        output, _ = process.communicate(timeout=180)
        assert process.returncode == 0, f"jupyter {' '.join(args)} failed:\n{output}"
        outputs.append(re.sub(r"\x1b\[[0-9;]*m", "", output))
    return outputs


def test_nbgrader_menu_in_browser(
    lab_server: Callable[[Path], LabServer], chromium_page: Any, output_dir: Path, tmp_path: Path
) -> None:
    """Does an instructor's JupyterLab show the Nbgrader menu with Formgrader and Validate?"""
    copy, _ = prepare_copy(CASES[0], tmp_path / "root")
    server = lab_server(copy.parent)
    open_notebook(chromium_page, server, copy.name)
    plugins = chromium_page.evaluate(
        """() => Object.fromEntries(['formgrader', 'validate-assignment', 'menu'].map(
            p => [p, window.jupyterapp.isPluginActivated('@jupyter/nbgrader:' + p)]))"""
    )
    assert all(plugins.values()), f"nbgrader lab plugins not activated: {plugins}"
    chromium_page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Nbgrader$")).click()
    menu = chromium_page.locator("#jp-mainmenu-nbgrader")
    chromium_page.locator(".jp-NotebookPanel-toolbar").get_by_text(
        "Validate", exact=True
    ).wait_for()
    menu.locator('.lm-Menu-item[data-command="nbgrader:open-formgrader"]').click()
    formgrader = chromium_page.frame_locator("#formgrader iframe")
    formgrader.get_by_text("Manage Assignments").first.wait_for()
    chromium_page.screenshot(path=str(output_dir / "jupyterlab-formgrader.png"))
