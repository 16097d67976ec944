"""OUT, written by one process only, the host: results, grades.csv, the manifest, the pages.

* ``results/<student>/<assignment>.json``: one per submission, written atomically as it
  completes (:func:`grader.results.save_result`), so a crash loses nothing
  already graded and a rerun resumes from them;
* ``grades.csv``: at the start the header and the rows kept from an earlier run, then one
  row appended (and flushed) per result as it completes, and at the end the whole file
  rewritten sorted, atomically. Each result costs one row: linear in the class. After a
  crash the file holds every row saved so far (unsorted); the rerun sorts it;
* ``feedback/`` and ``autograded/``: moved in from the outbox a worker left them in;
* ``manifest.json``: the batch and the shard, for ``merge`` and ``gradebook``;
* ``report.html`` and ``report.csv``: the class report (:mod:`grader.report`), at the end;
* ``not-graded.csv``: the files of each batch graded into OUT that belong to no student,
  with why (:meth:`Out.write_not_graded`); the report and the export name it.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from grader import late
from grader.autograde.host.pages import finish_page, host_paths
from grader.results import Result, atomic_write, csv_rows, csv_text, save_result

#: What a worker leaves in its outbox, moved to ``OUT/<part>/<student>/<assignment>/``.
PARTS = ("feedback", "autograded")
#: Files of nbgrader's exchange copied from a submission beside its feedback pages, where
#: ``nbgrader release_feedback`` reads them.
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")
#: The files of the batches graded into OUT that belong to no student: batch, file, why.
NOT_GRADED = "not-graded.csv"
NOT_GRADED_HEAD = ["batch", "file", "why"]


def read_not_graded(root: Path) -> list[dict[str, str]]:
    """The rows of ``OUT/not-graded.csv`` (none for a run older than the file)."""
    path = root / NOT_GRADED
    if not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class Out:
    """The output folder of one run, and the only code that writes into it."""

    def __init__(self, root: Path, exercises: list[str], policy: late.Policy | None = None,
                 lms: dict[tuple[str, str], dict] | None = None, deadline=lambda assignment: None,
                 times: dict[tuple[str, str], str] | None = None):
        self.root, self.exercises = root, exercises
        self.policy, self.lms = policy, lms or {}
        self.deadline = deadline  # assignment -> the run's deadline (ISO) or None
        self.times = times  # --submitted-at's times by key (None: no such file this run)
        self.sources: dict[tuple[str, str], Path] = {}  # submission folders, for EXCHANGE_FILES
        self.csv = root / "grades.csv"
        self._rows = None

    def settle(self, results: list[Result]) -> list[Result]:
        """What the run knows besides the grading: the LMS's ids and markers, the submission
        times of --submitted-at, the late policy (applied again to kept results: the policy may
        have changed since), and where the lateness came from. Returns the results this changed."""
        changed = []
        for result in results:
            before = (dict(result.lms), result.late_penalty, result.submitted_at, result.late_source)
            result.lms = self.lms.get(result.key, result.lms)
            due = self.deadline(result.assignment)
            own = result.submitted_at and result.late_source != late.FROM_SUBMITTED_AT  # timestamp.txt's
            from_csv = self.times is not None and due and not own
            if from_csv:
                self.apply_time(result, self.times.get(result.key, ""), due)
            result.late_source = late.late_source(result, due, bool(from_csv and result.key in self.times))
            late.apply([result], self.policy)
            if (result.lms, result.late_penalty, result.submitted_at, result.late_source) != before:
                changed.append(result)
        return changed

    @staticmethod
    def apply_time(result: Result, when: str, deadline: str) -> None:
        """A --submitted-at time (ISO, UTC; '' for none) as nbgrader's timestamp would be."""
        from grader.autograde.host.submissions import parse_timestamp

        result.submitted_at = when
        late_s = (parse_timestamp(when) - parse_timestamp(deadline)).total_seconds() if when else 0.0
        result.seconds_late = max(0.0, late_s)

    def start(self, kept: list[Result], carried: list[Result] = ()) -> None:
        """grades.csv as far as the earlier run got; rows are appended from here on.

        ``carried``: earlier rows this batch does not hold (:func:`grader.autograde.host.run.
        carry_over`), written as they are: this run's settings are not theirs."""
        for result in self.settle(kept):
            save_result(self.root, result)
        atomic_write(self.csv, csv_text([*kept, *carried], self.exercises))
        self._rows = open(self.csv, "a", encoding="utf-8", newline="")  # noqa: SIM115 - closed by finish

    def record(self, result: Result, outbox: str = "") -> None:
        """Keep one finished result: its pages, its JSON file, its row."""
        self.settle([result])
        if outbox:
            self.publish(result, Path(outbox))
        save_result(self.root, result)
        self._rows.write(csv_rows([result], self.exercises))
        self._rows.flush()

    def publish(self, result: Result, outbox: Path) -> None:
        """Move a worker's feedback pages and graded notebooks into OUT (replacing the old)."""
        student, assignment = result.key
        for part in PARTS:
            dest = self.root / part / student / assignment
            if dest.exists():
                shutil.rmtree(dest)
            if (outbox / part).is_dir() and any((outbox / part).iterdir()):
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(outbox / part), str(dest))
        pages = self.root / "feedback" / student / assignment
        source = self.sources.get(result.key)
        for name in EXCHANGE_FILES if source and pages.is_dir() else ():
            if (source / name).is_file():
                shutil.copy(source / name, pages / name)
        private = host_paths(self.root)
        for page in sorted(pages.glob("*.html")):
            page.write_text(finish_page(page.read_text(encoding="utf-8"), result, private), encoding="utf-8")
        result.feedback = [str(p.relative_to(self.root)) for p in sorted(pages.glob("*.html"))]
        shutil.rmtree(outbox, ignore_errors=True)

    def finish(self, results: list[Result]) -> None:
        """grades.csv sorted, written once, atomically; then the class report."""
        from grader.report import write_report

        if self._rows is not None:
            self._rows.close()
            self._rows = None
        atomic_write(self.csv, csv_text(results, self.exercises))
        write_report(self.root, results, self.exercises)

    def write_not_graded(self, batch: str, unplaced: dict[str, str]) -> Path:
        """``not-graded.csv``: this batch's files that belong to no student (its earlier rows
        replaced, other batches' kept), written by every run, also when there are none."""
        rows = [r for r in read_not_graded(self.root) if r["batch"] != batch]
        rows += [{"batch": batch, "file": f, "why": why} for f, why in sorted(unplaced.items())]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, NOT_GRADED_HEAD, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write(self.root / NOT_GRADED, buffer.getvalue())
        return self.root / NOT_GRADED

    def write_manifest(self, manifest: dict) -> None:
        atomic_write(self.root / "manifest.json", json.dumps(manifest, indent=1, default=str))
