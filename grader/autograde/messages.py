"""What crosses the pipe between the host and a grading worker: one JSON line per message.

Every message is a frozen dataclass with ``to_json``/``from_json``, tagged with its class
name, so a reader (and a static tool) can follow a value from one process to the other.
The host sends :class:`WorkerSettings` once, then :class:`GradeJob` and
:class:`TemplateJob`; the worker answers :class:`Ready` once, then :class:`Graded`,
:class:`TemplateBuilt` or :class:`Failed` per job.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from grader.autograde.sandbox.config import SandboxConfig
from grader.results import Result

#: The grading handler a worker serves jobs with (``module:attribute``; see
#: :class:`grader.autograde.worker.job.Handler`).
NBGRADER_HANDLER = "grader.autograde.worker.job:NbgraderHandler"


class Message:
    """A value that crosses the pipe; subclasses are frozen dataclasses."""

    def to_json(self) -> str:
        return json.dumps({"kind": type(self).__name__, **_plain(self)})

    @staticmethod
    def from_json(text: str) -> Message:
        data = json.loads(text)
        cls = KINDS[data.pop("kind")]
        return _build(cls, data)


def _plain(value):
    if isinstance(value, Result):
        return dataclasses.asdict(value)
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _build(cls, data: dict):
    """``cls`` from its JSON form: nested dataclasses and tuples rebuilt from their types."""
    nested = {"Result": Result.from_dict, "SandboxConfig": SandboxConfig.from_dict,
              "GradingOptions": lambda value: GradingOptions(**value)}
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        kind, value = str(f.type), data[f.name]  # annotations are strings here
        if kind in nested:
            value = nested[kind](value)
        elif kind.startswith("tuple["):
            value = tuple(value)
        values[f.name] = value
    return cls(**values)


@dataclass(frozen=True)
class GradingOptions:
    """How nbgrader runs a notebook (``Options.grading_key`` puts them in the fingerprint)."""

    timeout: int = 60  # seconds per cell
    kernel_name: str = "python3"
    max_output_chars: int = 1_000_000


@dataclass(frozen=True)
class WorkerSettings(Message):
    """Sent once, after :class:`Ready`: what every job of this run shares."""

    scratch: str  # the worker's scratch folder; one course per job under it
    outbox: str  # where a job leaves its feedback pages and graded notebooks for the host
    jupyter_path: str  # holds the sandboxed kernelspec
    sandbox: SandboxConfig
    grading: GradingOptions
    threads: int
    mpl_cache: str  # matplotlib's font cache, copied into every kernel's HOME


@dataclass(frozen=True)
class GradeJob(Message):
    """Grade one submission."""

    student: str
    assignment: str
    folder: str
    files: tuple[str, ...]
    notes: tuple[str, ...]
    source: str  # the instructor notebooks of the assignment
    template: str  # its template gradebook
    content_hash: str
    review: tuple[str, ...] = ()  # graded, and flagged for a person to look at (a renamed notebook)
    placed_as: tuple[tuple[str, str], ...] = ()  # (file, graded as): a notebook under another name


@dataclass(frozen=True)
class TemplateJob(Message):
    """Record an assignment in a template gradebook, as nbgrader generate_assignment does."""

    assignment: str
    source: str
    dest: str
    duedate: str | None = None


@dataclass(frozen=True)
class Ready(Message):
    """The worker has imported what it grades with."""

    pid: int


@dataclass(frozen=True)
class Graded(Message):
    """A graded submission; its pages and graded notebooks wait in ``outbox`` for the host."""

    result: Result
    outbox: str = ""


@dataclass(frozen=True)
class TemplateBuilt(Message):
    path: str


@dataclass(frozen=True)
class Failed(Message):
    """The job raised; ``error`` is the exception, as ``Type: message``."""

    error: str


KINDS = {cls.__name__: cls for cls in (WorkerSettings, GradeJob, TemplateJob, Ready, Graded,
                                       TemplateBuilt, Failed)}
