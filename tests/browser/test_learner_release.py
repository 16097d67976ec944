"""A new learner, from the release's README to the first failing and passing checks.

The test builds a student release through 10.4, installs it in a fresh virtual environment
by running the shell block of its README ("On your own computer") line by line, starts
that environment's JupyterLab as the README says (with a clean home: no settings of this
machine) and opens 10.4 in Debian's Chromium at 1366 px, a laptop's width. The learner
swaps sine and cosine in the first exercise and leaves the second one blank.

One change to the README's lines: PyTorch's CPU index is not reachable from this machine,
whose package index serves ``torch==2.13.0`` as that same CPU build from local disk, so the
``--index-url`` of that line is dropped (the test then checks that torch is a CPU build);
and pip leaves byte-compiling to Python's first imports (``PIP_NO_COMPILE``), which saves
about a minute of the install on two cores and changes nothing a learner sees.

Screenshots (tests/output/learner-*.png): the opening, the failing check, "where you stand".
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from grader.publish import learner
from tests.browser.lab import CHROMIUM_ARGS, free_port, stop, wait_until_up
from tests.browser.test_jupyterlab import RUN_TIMEOUT_MS, wait_kernel_idle, wait_run_finished

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "10.4-positional-encoding"
NOTEBOOK = f"{ASSIGNMENT}/positional_encoding.ipynb"
INSTALL_TIMEOUT_S = 900  # about 2 minutes on an idle 2-core machine; much more when it is shared
SWAPPED = """\
position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # (max_len, 1)
rates = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))  # (d_model/2,)
pe = torch.zeros(max_len, d_model)
pe[:, 0::2] = torch.cos(position * rates)  # deliberately wrong: sine and cosine swapped
pe[:, 1::2] = torch.sin(position * rates)
return pe"""
RAISE_TODO = re.compile(r"^(?P<indent>[ \t]*)raise NotImplementedError.*$", re.MULTILINE)
NBGRADER_UI = re.compile(r"nbgrader|formgrader|create assignment|validate", re.IGNORECASE)


def readme_steps(readme: str) -> list[str]:
    """The shell lines of the README's "On your own computer" block."""
    section = readme.split("## On your own computer", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the README has no ```bash block under 'On your own computer'"
    return [line for line in block[1].splitlines() if line.strip()]


def clean_env(home: Path) -> dict[str, str]:
    """This machine's environment as a new user would have it: a fresh home, no venv active,
    no Jupyter or Python paths of this checkout."""
    ours = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "PYTHON", "VIRTUAL_ENV", "COURSE", "MPL"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != ours)
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Any]:
    """A release through 10.4, installed by its README's own lines into ``release/.venv``."""
    base = tmp_path_factory.mktemp("learner")
    release = base / "release"
    subprocess.run([sys.executable, "-m", "grader", "student-bundle", str(release), "--through", "10.4",
                    "--repository", "example-org/transformer-course"], check=True, cwd=REPO,
                   capture_output=True)
    steps = readme_steps((release / "README.md").read_text())
    assert steps[-1] == "jupyter lab notebooks/", steps
    here = [line.replace(f" --index-url {learner.TORCH_CPU_INDEX}", "") for line in steps[:-1]]
    env = clean_env(base / "home")
    env["PIP_NO_COMPILE"] = "1"  # Python compiles on first import instead: a minute less on 2 cores
    # Every cell in the page (no windowing), so that cells are found by their index.
    tracker = base / "home" / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}\n')
    started = time.monotonic()
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(here)], cwd=release, env=env,
                          capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"README install steps: {seconds:.0f} s")
    return {"release": release, "env": env, "install_s": seconds, "home": base / "home"}


def venv_python(installed) -> str:
    return str(installed["release"] / ".venv" / "bin" / "python")


def test_the_readme_installs_cpu_torch_jupyterlab_and_no_instructor_tools(installed):
    """The README's venv has JupyterLab, ipykernel, the helpers and a CPU-only torch, and no
    nbgrader; JupyterLab's news plugin is disabled there."""
    probe = ("import importlib.util as u, json, torch, course, jupyterlab, ipykernel;"
             "print(json.dumps({'cuda': torch.version.cuda, 'torch': torch.__version__,"
             " 'nbgrader': u.find_spec('nbgrader') is not None}))")
    done = subprocess.run([venv_python(installed), "-c", probe], env=installed["env"],
                          capture_output=True, text=True, cwd=installed["release"], check=True)
    found = json.loads(done.stdout)
    assert found["cuda"] is None and found["torch"].startswith("2.13.0"), found
    assert not found["nbgrader"], "learners get no nbgrader"
    listed = subprocess.run([str(installed["release"] / ".venv" / "bin" / "jupyter"), "labextension",
                             "list"], env=installed["env"], capture_output=True, text=True,
                            cwd=installed["release"])
    assert learner.NEWS_PLUGIN in listed.stdout + listed.stderr


def prepare(notebook: Path) -> dict[str, int]:
    """The learner's edits: sine and cosine swapped in the first exercise, the second left
    blank; every cell after the set-up tagged raises-exception so Run All goes on to the end
    (what a learner does by running cells one by one). Returns cell indices by grade id."""
    nb = json.loads(notebook.read_text())
    ids = {c["metadata"].get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb["cells"])}
    cell = nb["cells"][ids["sinusoidal_positional_encoding"]]

    def swapped(match: re.Match[str]) -> str:
        return "\n".join(match["indent"] + line for line in SWAPPED.splitlines())

    cell["source"] = RAISE_TODO.sub(swapped, "".join(cell["source"]), count=1)
    for c in nb["cells"][ids["setup"] + 1:]:
        if c["cell_type"] == "code":
            c["metadata"].setdefault("tags", []).append("raises-exception")
    notebook.write_text(json.dumps(nb, indent=1))
    ids["where_you_stand"] = max(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    return ids


@pytest.fixture
def lab(installed, tmp_path):
    """The release's JupyterLab, started as the README says (plus a port and a token)."""
    release = installed["release"]
    port, token = free_port(), secrets.token_hex(16)
    log = tmp_path / "server.log"
    jupyter = str(release / ".venv" / "bin" / "jupyter")
    command = [jupyter, "lab", "notebooks/", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", "--LabApp.expose_app_in_browser=True"]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    env = {**installed["env"], "PATH": f"{release / '.venv' / 'bin'}{os.pathsep}{installed['env']['PATH']}"}
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=release, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_up(url, token, process, log)
        yield {"url": url, "token": token, "log": log}
    finally:
        stop(process)


@pytest.fixture
def laptop(chromium_executable, playwright_api, tmp_path):
    """Chromium at a laptop's 1366 x 768."""
    with playwright_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(chromium_executable), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1366, "height": 768})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def output_text(page: Any, index: int) -> str:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.evaluate("cell => cell.scrollIntoView({block: 'start'})")
    outputs = cell.locator(".jp-OutputArea")
    return outputs.inner_text() if outputs.count() else ""


def shoot(page: Any, index: int, path: Path) -> None:
    page.locator(".jp-Notebook .jp-Cell").nth(index).evaluate(
        "cell => cell.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(400)
    page.screenshot(path=str(path))


def test_a_learner_sees_the_course_and_nothing_else(installed, lab, laptop, output_dir, tmp_path):
    """No instructor menu, no news pop-up, no warning under the set-up cell, a set-up cell as
    wide as the notebook; a failing check in at most 8 lines, a blank exercise in one; and
    the saved notebook still fails those cells for nbgrader's Validate and for grading."""
    started = time.monotonic()
    notebook = installed["release"] / "notebooks" / NOTEBOOK
    ids = prepare(notebook)
    page = laptop
    page.set_default_timeout(60_000)
    page.goto(f"{lab['url']}lab/tree/{NOTEBOOK}?token={lab['token']}")
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for()
    wait_kernel_idle(page)
    page.wait_for_timeout(3000)  # the news question comes a moment after the page
    page.screenshot(path=str(output_dir / "learner-opening.png"))

    menus = page.locator(".lm-MenuBar-item").all_inner_texts()
    assert not [m for m in menus if NBGRADER_UI.search(m)], menus
    sidebars = page.locator(".jp-SideBar .lm-TabBar-tab").evaluate_all(
        "tabs => tabs.map(t => (t.title || '') + ' ' + t.textContent)")
    assert not [t for t in sidebars if NBGRADER_UI.search(t)], sidebars
    toolbar = page.locator(".jp-NotebookPanel-toolbar").inner_text()
    assert not NBGRADER_UI.search(toolbar), toolbar
    assert not page.evaluate("() => window.jupyterapp.hasPlugin('@jupyter/nbgrader:menu')")
    assert not page.evaluate(f"() => window.jupyterapp.isPluginActivated({learner.NEWS_PLUGIN!r})")
    toasts = page.locator(".Toastify__toast, .jp-Notification-Toast")
    assert toasts.count() == 0, toasts.all_inner_texts()

    setup = page.locator(".jp-Notebook .jp-Cell").nth(ids["setup"])
    overflow = setup.locator(".cm-scroller").evaluate("s => s.scrollWidth - s.clientWidth")
    assert overflow <= 0, f"the set-up cell is {overflow} px wider than the notebook at 1366 px"

    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator('#jp-mainmenu-run .lm-Menu-item[data-command="runmenu:run-all"]').click()
    wait_run_finished(page)
    last = page.locator(".jp-Notebook .jp-Cell").nth(ids["where_you_stand"]).locator(".jp-InputPrompt")
    last.filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=RUN_TIMEOUT_MS)  # ran, to the end
    wait_kernel_idle(page)

    assert output_text(page, ids["setup"]) == "", "output (a warning?) under the set-up cell"
    failing = output_text(page, ids["check_sinusoidal_positional_encoding"])
    shoot(page, ids["check_sinusoidal_positional_encoding"], output_dir / "learner-failing-check.png")
    shoot(page, ids["where_you_stand"], output_dir / "learner-where-you-stand.png")
    stand = output_text(page, ids["where_you_stand"])
    assert "sinusoidal_positional_encoding" in stand, stand
    assert "sine and cosine swapped" in failing, failing
    lines = failing.strip().splitlines()
    assert len(lines) <= 8, f"{len(lines)} lines for a failing check:\n{failing}"
    blank = output_text(page, ids["check_PositionalEncoding"]).strip()

    page.keyboard.press("Control+s")
    page.wait_for_timeout(1500)
    saved = nbformat.read(notebook, as_version=4)
    errors = [saved.cells[ids[name]].outputs for name in
              ("check_sinusoidal_positional_encoding", "check_PositionalEncoding")]
    assert all(any(o.output_type == "error" for o in outs) for outs in errors), "saved without errors"
    counted_as_failed(notebook, tmp_path)
    print(f"in the browser: {time.monotonic() - started:.0f} s; install: {installed['install_s']:.0f} s")
    one_line = len(blank.splitlines()) == 1 and re.search(r"not (written|attempted) yet", blank)
    if not one_line and not (installed["release"] / "course" / "visible" / "s10_4").is_dir():
        pytest.xfail("10.4's visible checks are not on the checking toolkit (course/checking) yet: "
                     f"its blank exercise still shows {len(blank.splitlines())} lines")
    assert one_line, f"a blank exercise should show one line:\n{blank}"


def counted_as_failed(notebook: Path, tmp_path: Path) -> None:
    """nbgrader's Validate (the instructor's tools, this checkout's environment) and the
    course's grading both fail the swapped and the blank exercise."""
    validated = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(notebook)],
                               capture_output=True, text=True, cwd=tmp_path, timeout=300)
    report = validated.stdout + validated.stderr
    assert "VALIDATION FAILED" in report, report[-3000:]
    for name in ("sinusoidal_positional_encoding(", "PositionalEncoding("):
        assert name in report, (name, report[-3000:])
    submitted = tmp_path / "submitted" / "learner" / ASSIGNMENT
    submitted.mkdir(parents=True)
    shutil.copy(notebook, submitted / notebook.name)
    out = tmp_path / "graded"
    subprocess.run([sys.executable, "-m", "grader", "autograde", str(tmp_path / "submitted"), "--out",
                    str(out), "--jobs", "1", "--quiet"], cwd=REPO, capture_output=True, timeout=600)
    rows = list(csv.DictReader((out / "grades.csv").read_text().splitlines()))
    (row,) = [r for r in rows if r["student_id"] == "learner"]
    assert row["status"] == "ok", row
    exercise = re.compile(r"\b(sinusoidal_positional_encoding|PositionalEncoding)$")
    points = {k: v for k, v in row.items() if exercise.search(k)}
    assert len(points) == 2 and all(float(v) == 0 for v in points.values()), row
