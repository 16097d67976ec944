"""Does the fast tier keep its promise: no kernel, no nbgrader run, no fresh Python (tests/fast_tier.py)?"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fast_tier import FreshProcess, guarded, in_fast_tier, starts_python


@pytest.mark.parametrize("command", [
    [sys.executable, "-c", "pass"], ["python3", "-m", "pytest"], ["nbgrader", "autograde", "10.1"],
    ["jupyter-nbconvert", "--execute"], "bwrap --ro-bind / / python -m ipykernel_launcher -f k.json",
])
def test_starts_of_python_jupyter_and_nbgrader_are_seen(command):
    assert starts_python(command) is not None


@pytest.mark.parametrize("command", [["git", "status"], ["ruff", "check", "."], "bwrap --version",
                                     ["git", "commit", "-m", "python scripts"]])
def test_other_programs_are_let_through(command):
    assert starts_python(command) is None


def test_a_fast_test_that_starts_python_fails(request):
    """Is a fresh Python refused in a fast-tier test, and the test failed even when its code
    swallows the error? (git still runs.)"""
    phase = guarded(request.node)
    next(phase)  # the test's phase runs from here
    subprocess.run(["git", "--version"], capture_output=True, check=True)
    with pytest.raises(FreshProcess, match="mark it @pytest.mark.slow"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(pytest.fail.Exception, match="is in the fast tier and started"):
        phase.send(None)


def test_slow_and_browser_tests_may_start_processes(request):
    class Marked:
        def __init__(self, name):
            self.name = name

        def get_closest_marker(self, name):
            return object() if name == self.name else None

    assert in_fast_tier(request.node)
    assert not in_fast_tier(Marked("slow")) and not in_fast_tier(Marked("browser"))


def _timed_tests():
    import importlib.util

    from tests.settings import ROOT

    spec = importlib.util.spec_from_file_location("timed_tests", ROOT / "scripts" / "timed_tests.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.mark.parametrize(("used", "code", "want"), [(10.0, 0, 0), (10_000.0, 0, 1), (10.0, 1, 1)])
def test_a_tier_past_its_budget_fails(monkeypatch, capsys, used, code, want):
    """Does ``scripts/timed_tests.py`` print the tier's CPU seconds and its budget, pass pytest's
    failure through, and fail a green run that used more than tests/budget.toml allows?"""
    script = _timed_tests()
    readings = iter([5.0, 5.0 + used])
    monkeypatch.setattr(script, "children_cpu", lambda: next(readings))
    monkeypatch.setattr(script, "calibrate", lambda: script.reference_calibration())  # the reference's speed
    monkeypatch.setattr(script.subprocess, "call", lambda command, cwd: code)  # no pytest started
    assert script.main(["fast", "-m", "not slow"]) == want
    out = capsys.readouterr()
    assert f"fast tier: {used:.0f} CPU seconds (user + sys), budget {script.budget('fast'):.0f} " in out.out
    assert ("over its budget" in out.err) == (code == 0 and want == 1)


def test_an_unknown_tier_says_which_there_are():
    with pytest.raises(SystemExit, match=r"no \[nightly\] budget; it has \['fast'"):
        _timed_tests().budget("nightly")


def test_the_budget_scales_with_the_machines_speed(monkeypatch, capsys):
    """On a machine that runs the calibration workload 3 times slower than the reference, does a
    tier that used 2.5 times the reference budget pass, and 3.5 times fail?"""
    script = _timed_tests()
    monkeypatch.setattr(script, "calibrate", lambda: 3 * script.reference_calibration())
    monkeypatch.setattr(script.subprocess, "call", lambda command, cwd: 0)
    for share, want in ((2.5, 0), (3.5, 1)):
        readings = iter([0.0, share * script.budget("fast")])
        monkeypatch.setattr(script, "children_cpu", lambda readings=readings: next(readings))
        assert script.main(["fast"]) == want
    assert "x 3.00" in capsys.readouterr().out


def test_the_calibration_measures_something():
    seconds = _timed_tests().calibrate()
    assert 0.01 < seconds < 30
