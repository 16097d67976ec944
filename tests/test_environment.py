"""Binder's environment.yml and pip's requirements.txt pin the same packages and versions."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.settings import ROOT

REPO = ROOT
REQUIREMENTS = REPO / "requirements.txt"
ENVIRONMENT = REPO / "environment.yml"
CONDA_TO_PIP = {"pytorch": "torch", "matplotlib-base": "matplotlib"}
NOT_PACKAGES = {"python", "pip", "setuptools"}  # for postBuild; not in requirements.txt
GPU_HINTS = re.compile(r"cuda|cudnn|nvidia|nccl|pytorch-gpu|gpu_", re.IGNORECASE)
CONDA_SPEC = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)\s*(?:={1,2}\s*(?P<version>[^=\s]+))?"
    r"(?:\s*=\s*(?P<build>\S+))?$"
)


def parse_requirements(text: str) -> dict[str, str]:
    """``{name: version}`` of a pip requirements file; every requirement must be ``==``-pinned."""
    pins: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip(), f"requirements.txt: {line!r} is not pinned with =="
        pins[canonical(name)] = version.strip()
    return pins


def canonical(name: str) -> str:
    """A package name as PEP 503 normalises it (lower case, runs of -_. as one -)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def conda_specs(environment: dict[str, Any]) -> list[re.Match[str]]:
    """The conda (non-pip) dependencies of an environment.yml, parsed into name/version/build."""
    specs = []
    for dep in environment.get("dependencies", []):
        if isinstance(dep, str):
            match = CONDA_SPEC.match(dep.strip())
            assert match, f"environment.yml: cannot read the dependency {dep!r}"
            specs.append(match)
    return specs


def environment_pins(environment: dict[str, Any]) -> dict[str, str | None]:
    """``{pip name: version}`` of the conda dependencies, python and pip left out."""
    return {
        canonical(CONDA_TO_PIP.get(spec["name"], spec["name"])): spec["version"]
        for spec in conda_specs(environment)
        if spec["name"] not in NOT_PACKAGES
    }


def pip_section(environment: dict[str, Any]) -> list[str]:
    """The lines of environment.yml's ``pip:`` section (empty when there is none)."""
    lines: list[str] = []
    for dep in environment.get("dependencies", []):
        if isinstance(dep, dict):
            lines.extend(str(line) for line in dep.get("pip", []))
    return lines


def drift(requirements: dict[str, str], environment: dict[str, str | None]) -> list[str]:
    """What differs between the two pin sets, one line per package; empty when in step."""
    lines = []
    for name in sorted(requirements.keys() | environment.keys()):
        pip, conda = requirements.get(name, "missing"), environment.get(name, "missing")
        if pip != conda:
            lines.append(f"{name}: requirements.txt {pip}, environment.yml {conda}")
    return lines


def load_environment(text: str) -> dict[str, Any]:
    """An environment.yml's content as a dict."""
    data = yaml.safe_load(text)
    assert isinstance(data, dict), "environment.yml should hold a mapping"
    return data


@pytest.fixture(scope="module")
def environment() -> dict[str, Any]:
    """The repository's environment.yml."""
    return load_environment(ENVIRONMENT.read_text())


def test_same_packages_and_versions(environment: dict[str, Any]) -> None:
    """Do environment.yml and requirements.txt pin the same packages at the same versions?"""
    differences = drift(parse_requirements(REQUIREMENTS.read_text()), environment_pins(environment))
    assert not differences, "environment.yml and requirements.txt drifted:\n" + "\n".join(
        differences
    )


def test_the_course_packages_are_declared(environment: dict[str, Any]) -> None:
    """Does environment.yml declare every package of the course (jupyterlab, numpy, torch,
    matplotlib, nbgrader, pytest)?"""
    declared = environment_pins(environment)
    missing = {"jupyterlab", "numpy", "torch", "matplotlib", "nbgrader", "pytest"} - set(declared)
    assert not missing, f"environment.yml lacks {sorted(missing)}"


def test_conda_forge_only(environment: dict[str, Any]) -> None:
    """Does Binder take every conda package from conda-forge alone?"""
    assert environment.get("channels") == ["conda-forge"], environment.get("channels")
    channel_prefixed = [s["name"] for s in conda_specs(environment) if "::" in s.string]
    assert not channel_prefixed, f"packages pinned to another channel: {channel_prefixed}"


def test_python_311(environment: dict[str, Any]) -> None:
    """Is Binder's Python 3.11, as on the course machines?"""
    versions = [s["version"] for s in conda_specs(environment) if s["name"] == "python"]
    assert versions == ["3.11"], f"python should be pinned to 3.11, found {versions}"


def test_pytorch_is_a_cpu_build(environment: dict[str, Any]) -> None:
    """Is PyTorch a CPU build, with nothing GPU-sized anywhere in the environment?"""
    torch = [s for s in conda_specs(environment) if s["name"] == "pytorch"]
    assert len(torch) == 1 and torch[0]["build"] == "cpu_*", "want pytorch=<version>=cpu_*"
    gpu = [s.string for s in conda_specs(environment) if GPU_HINTS.search(s.string)]
    gpu += [line for line in pip_section(environment) if GPU_HINTS.search(line)]
    assert not gpu, f"GPU packages in environment.yml: {gpu}"


def test_no_pip_section(environment: dict[str, Any]) -> None:
    """Does conda install everything (postBuild adds the course), so no pin hides in pip:?"""
    assert pip_section(environment) == [], f"pip: section found: {pip_section(environment)}"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("numpy=2.4.6", "numpy=2.4.7"), "numpy: requirements.txt 2.4.6"),
        (lambda t: t.replace("pytorch=2.13.0=cpu_*", "pytorch=2.12.0=cpu_*"), "torch:"),
        (
            lambda t: t.replace("  - tqdm=4.70.1\n", ""),
            "tqdm: requirements.txt 4.70.1, environment.yml missing",
        ),
        (
            lambda t: t.replace("  - pip\n", "  - scipy=1.16.0\n  - pip\n"),
            "scipy: requirements.txt missing",
        ),
    ],
    ids=["version", "torch-version", "package-removed", "package-added"],
)
def test_drift_is_caught(edit: Any, expected: str) -> None:
    """Would a changed version, or a package added or removed on one side, be reported?"""
    text = ENVIRONMENT.read_text()
    edited = edit(text)
    assert edited != text, "the edit did not apply: update this test with environment.yml"
    differences = drift(
        parse_requirements(REQUIREMENTS.read_text()), environment_pins(load_environment(edited))
    )
    assert any(line.startswith(expected) for line in differences), differences


def test_requirements_drift_is_caught() -> None:
    """Would a version bumped in requirements.txt alone be reported?"""
    text = REQUIREMENTS.read_text()
    edited = re.sub(r"^ipykernel==\S+$", "ipykernel==0.0.1", text, flags=re.MULTILINE)
    assert edited != text, "the edit did not apply: update this test with requirements.txt"
    differences = drift(
        parse_requirements(edited), environment_pins(load_environment(ENVIRONMENT.read_text()))
    )
    pinned = parse_requirements(text)["ipykernel"]
    expected = f"ipykernel: requirements.txt 0.0.1, environment.yml {pinned}"
    assert differences == [expected], differences


def test_unpinned_requirement_is_refused() -> None:
    """Does an unpinned line in requirements.txt fail the comparison instead of passing?"""
    with pytest.raises(AssertionError, match="not pinned"):
        parse_requirements("numpy>=2\n")
