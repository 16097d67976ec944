"""nbgrader's own converters, run for one submission in a scratch course.

Every submission is graded by nbgrader's ``Autograde`` and ``GenerateFeedback``
converters in a scratch course directory of its own (own ``gradebook.db``: SQLite has one
writer), with the course's configuration plus the robust preprocessors of
:mod:`grader.autograde.worker.preprocessors`. Template gradebooks (``GenerateAssignment``, once
per assignment) hold what the hidden tests are restored from.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.converters.base import NbGraderException
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
)
from traitlets.config import Config

from grader.autograde.messages import GradingOptions
from grader.autograde.worker.preprocessors.hide_hidden_tracebacks import HideHiddenTracebacks
from grader.autograde.worker.preprocessors.mark_duplicates import MarkDuplicates
from grader.autograde.worker.preprocessors.resilient_execute import ResilientExecute
from grader.autograde.worker.preprocessors.restore_cells import RestoreCells
from grader.autograde.worker.preprocessors.save_auto_grades import SaveAutoGradesIgnoringStderr
from grader.errors import TemplateError
from grader.paths import COURSE_ID, CourseLayout, nbgrader_config

# ---------------------------------------------------------------- configuration


def course_config(root: Path, options: GradingOptions, source_notebook: Path | None = None
                  ) -> Config:
    """The course's nbgrader configuration plus the robust-grading overrides."""
    config = nbgrader_config(root)
    config.Execute.timeout = options.timeout
    config.Execute.kernel_name = options.kernel_name
    config.Execute.interrupt_on_timeout = True
    config.NotebookClient.shutdown_kernel = "graceful"
    config.ResilientExecute.max_output_chars = options.max_output_chars
    # Unix sockets, so a kernel in its own network namespace is still reachable. Their
    # path must be absolute: the kernel starts in the notebook's folder, nbgrader elsewhere.
    config.KernelManager.transport = "ipc"
    runtime = os.environ.get("JUPYTER_RUNTIME_DIR") or tempfile.gettempdir()
    config.KernelManager.ip = os.path.join(runtime, "kernel")
    config.Autograde.sanitize_preprocessors = [
        ClearOutput, MarkDuplicates, OverwriteKernelspec, RestoreCells, CheckCellMetadata]
    config.Autograde.autograde_preprocessors = [
        ResilientExecute, IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
        SaveAutoGradesIgnoringStderr, AssignLatePenalties, CheckCellMetadata]
    # Feedback shows the learner the diagnosis, not the hidden-test code that produced it.
    config.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTracebacks, ClearHiddenTests,
                                             CSSHTMLHeaderPreprocessor]
    config.GenerateFeedback.exporter_class = FeedbackPage
    if source_notebook is not None:
        config.RestoreCells.source_notebook = str(source_notebook)
    return config


class FeedbackPage(HTMLExporter):
    """nbconvert's HTML page, without its second pass over the page where that pass does nothing.

    ``HTMLExporter`` renders the page, then parses all of it again with BeautifulSoup to give
    images alt text and the JupyterLab template's cells and widgets a tabindex. A feedback
    page uses nbgrader's classic template, and graded kernels draw no figures and no progress
    bars (:data:`grader.autograde.worker.job.KERNEL_CONFIG`), so that pass changes nothing, yet it
    costs 60% of the page's CPU (0.25 s of a 10.6 page, measured with cProfile). A page with
    an image or such a tag gets the whole of nbconvert's export;
    ``tests/test_autograde.py`` checks that both ways give the same page.
    """

    #: The tags the second pass rewrites (the class names alone also occur in the page's CSS).
    MARKUP_PASS_TARGETS = re.compile(
        r'<img\b|<div\b[^>]*\bclass="[^"]*\bjp-(?:Cell-inputWrapper|OutputArea-output)\b')

    def from_notebook_node(self, nb, resources=None, **kw):
        untouched = copy.deepcopy(resources)  # for the whole export, should the page need it
        try:
            html, resources = self._render(nb, resources, **kw)
        except (ImportError, AttributeError):  # an nbconvert whose insides moved: its own way
            return super().from_notebook_node(nb, untouched, **kw)
        if self.MARKUP_PASS_TARGETS.search(html):
            return super().from_notebook_node(nb, untouched, **kw)
        return html, resources

    def _render(self, nb, resources, **kw):
        """What ``HTMLExporter.from_notebook_node`` does before its second pass."""
        from nbconvert.filters.highlight import Highlight2HTML
        from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

        language = nb.metadata.get("language_info", {})
        lexer = language.get("pygments_lexer", language.get("name"))
        self.register_filter("highlight_code", self.filters.get(
            "highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(
            notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)


def coursedir(config: Config, assignment: str, student: str = "*") -> CourseDirectory:
    cd = CourseDirectory(config=config)
    cd.assignment_id = assignment
    cd.student_id = student
    return cd


# ---------------------------------------------------------------- logs


class LogCapture(logging.Handler):
    """Collects nbgrader's warnings and errors for one run."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())

    def __enter__(self) -> LogCapture:
        logging.getLogger().addHandler(self)
        logging.getLogger("traitlets").addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)
        logging.getLogger("traitlets").removeHandler(self)

    def errors(self) -> str:
        """The exception lines of the captured tracebacks (or the last messages), for a reason."""
        lines = [line for record in self.records for line in record.splitlines()
                 if line.strip() and not line.startswith((" ", "Traceback", "Please see"))]
        raised = [line for line in lines if re.match(r"^[A-Za-z_.]+(Error|Exception)\b", line)]
        return " | ".join(dict.fromkeys(raised[-2:] or lines[-2:]))


# ---------------------------------------------------------------- templates


def build_template(assignment: str, source: Path, dest: Path, duedate: str | None) -> Path:
    """A gradebook.db holding ``assignment`` as nbgrader generate_assignment records it.

    Copied into every scratch course, it is what OverwriteCells restores hidden tests
    from. ``duedate`` (ISO, naive = UTC) lets nbgrader compute lateness from timestamp.txt.
    """
    course = CourseLayout(dest / "course")
    if course.root.exists():
        shutil.rmtree(course.root)
    shutil.copytree(source, course.source(assignment))
    config = course_config(course.root, GradingOptions())
    with LogCapture() as log:
        try:
            GenerateAssignment(coursedir=coursedir(config, assignment), config=config,
                               force=True).start()
        except (NbGraderException, SystemExit) as error:
            raise TemplateError(f"nbgrader generate_assignment failed for {assignment}: "
                                f"{log.errors() or error}; `python -m grader generate {assignment}` "
                                "shows nbgrader's whole log") from None
    with Gradebook(course.db_url, COURSE_ID) as gb:
        gb.update_or_create_assignment(assignment, duedate=utils.parse_utc(duedate)
                                       if duedate else None)
    template = dest / course.gradebook.name
    shutil.copy(course.gradebook, template)
    shutil.rmtree(course.root)
    return template


# ---------------------------------------------------------------- one submission


@dataclass
class NbgraderRun:
    """What nbgrader produced for one submission in its scratch course."""

    root: Path
    ok: bool
    log: str
    feedback_ok: bool = False

    def autograded(self, student: str, assignment: str) -> Path:
        return CourseLayout(self.root).autograded(student, assignment)

    def feedback(self, student: str, assignment: str) -> Path:
        return CourseLayout(self.root).feedback(student, assignment)


def run_autograde(root: Path, assignment: str, student: str, options: GradingOptions,
                  source_notebook: Path) -> NbgraderRun:
    """``nbgrader autograde`` of one submission in its scratch course."""
    config = course_config(root, options, source_notebook)
    with LogCapture() as log:
        try:
            Autograde(coursedir=coursedir(config, assignment, student), config=config,
                      force=True).start()
            ok = True
        except (NbGraderException, SystemExit, Exception) as error:  # noqa: BLE001
            log.records.append(f"{type(error).__name__}: {error}")
            ok = False
    if not ok:
        print("\n".join(log.records), file=sys.stderr)  # the worker's log keeps the traceback
    run = NbgraderRun(root, ok, log.errors())
    return run


def run_feedback(run: NbgraderRun, assignment: str, student: str, options: GradingOptions,
                 source_notebook: Path) -> None:
    """``nbgrader generate_feedback`` (after any score corrections were saved)."""
    config = course_config(run.root, options, source_notebook)
    with LogCapture() as log:
        try:
            GenerateFeedback(coursedir=coursedir(config, assignment, student), config=config,
                             force=True).start()
            run.feedback_ok = True
        except (NbGraderException, SystemExit, Exception) as error:  # noqa: BLE001
            run.log = f"feedback failed: {log.errors() or error}"


def override_scores(root: Path, assignment: str, student: str, points: dict[str, float]) -> None:
    """Save corrected points (by grade id) as nbgrader manual scores, so feedback shows them."""
    with Gradebook(CourseLayout(root).db_url, COURSE_ID) as gb:
        for notebook in gb.find_submission(assignment, student).notebooks:
            for grade in notebook.grades:
                if grade.name in points:
                    grade.manual_score = points[grade.name]
        gb.db.commit()


@dataclass
class GradebookGrades:
    """Scores nbgrader saved for one submission."""

    points: dict[str, float | None]  # grade id -> points (None: needs manual grading)
    max_points: dict[str, float]
    timestamp: str
    seconds_late: float


def read_grades(root: Path, assignment: str, student: str) -> GradebookGrades:
    """Read one submission's grades back from its scratch gradebook."""
    points: dict[str, float | None] = {}
    max_points: dict[str, float] = {}
    with Gradebook(CourseLayout(root).db_url, COURSE_ID) as gb:
        submission = gb.find_submission(assignment, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                points[grade.name] = grade.score
                max_points[grade.name] = grade.max_score
        timestamp = submission.timestamp.isoformat() if submission.timestamp else ""
        late = float(submission.total_seconds_late or 0)
    return GradebookGrades(points, max_points, timestamp, late)
