"""Command line of the course's grading tools: ``python -m grader COMMAND ...``.

Commands:
  generate   regenerate notebooks/ from solutions/ with nbgrader
  verify     re-check saved records in a clean process (see grader.autograde.worker.verify)
  student-bundle  build or extend the public student release (--through SECTION: week by week)
  autograde  grade a whole class with nbgrader: grades.csv and feedback (docs/grading.md)
  merge      combine the outputs of sharded autograde runs into one grades.csv
  report     the class report of an autograde run: report.html and report.csv in OUT
  gradebook  import a finished (or merged) autograde run into the course's nbgrader gradebook
  regrade    grade named students again, keeping everyone else's rows and what they had before
  export     the grades as Canvas's or Moodle's grade import reads them
  feedback   the feedback pages as one zip per student (and Canvas's or Moodle's bulk-upload zips)
  new-exercise  a new exercise's files and notebook cells, placeholders to fill (docs/course.md)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grader.errors import GraderError, UsageError


def _generate(args: argparse.Namespace) -> int:
    from grader.publish.generate import generate

    for name in generate(args.assignments or None, force=args.force):
        print(f"generated notebooks/{name}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from grader.autograde.worker.verify import verify_records

    verdicts = verify_records(Path(args.records))
    print(json.dumps({k: {"passed": v.passed, "flags": list(v.flags)} for k, v in verdicts.items()},
                     indent=1))
    return 0


def _student_bundle(args: argparse.Namespace) -> int:
    from grader.publish.bundle import publish, read_release

    repository = args.repository
    if repository is None:
        previous = read_release(Path(args.out))
        if previous is None:
            raise UsageError("--repository OWNER/NAME is required: the GitHub repository the "
                             "learners' release is published as (its badges, and where every "
                             "notebook's set-up cell installs the helpers from on Colab). For the "
                             "course's own public release, pass --repository "
                             "transformer-course/transformer-course.")
        repository = previous["repository"]
    release = publish(Path(args.out), repository=repository, branch=args.branch,
                      through=args.through)
    print(release.text())
    return 0


def _deadlines(values: list[str]) -> dict[str, str]:
    """``--deadline ISO`` (every assignment) or ``--deadline ASSIGNMENT=ISO``, checked."""
    from grader.autograde.host.submissions import parse_timestamp

    deadlines = {}
    for value in values or []:
        name, _, when = value.rpartition("=") if "=" in value else ("*", "", value)
        try:
            parse_timestamp(when)
        except (ValueError, OverflowError):
            raise UsageError(f"--deadline {value!r}: expected an ISO time such as "
                             "2026-12-01T23:59:00+01:00 (no offset means UTC).") from None
        deadlines[name] = when
    return deadlines


def _autograde(args: argparse.Namespace) -> int:
    from grader.autograde.host.options import Options
    from grader.autograde.host.run import autograde
    from grader.autograde.host.submissions import parse_shard
    from grader.paths import course_package_dir

    course_package_dir()  # a shadowed `course` package stops here, with what to do
    options = Options(timeout=args.timeout, shard=parse_shard(args.shard), force=args.force,
                      deadlines=_deadlines(args.deadline), assignments=args.assignment or None,
                      submitted_at=args.submitted_at,
                      memory_mb=args.memory_mb, submission_timeout=args.notebook_timeout,
                      sandbox_user=None if args.no_sandbox_user else args.sandbox_user,
                      isolate_network=not args.allow_network, isolate_files=not args.no_file_sandbox,
                      require_sandbox=args.require_sandbox, progress=not args.quiet)
    if args.jobs:
        options.jobs = args.jobs
    summary = autograde(Path(args.submissions), Path(args.out), options)
    print(summary.text())
    return 0


def _regrade(args: argparse.Namespace) -> int:
    from grader.paths import course_package_dir
    from grader.regrade import regrade, run_options

    course_package_dir()  # a shadowed `course` package stops here, with what to do
    options = run_options(Path(args.out))
    options.progress = not args.quiet
    if args.jobs:
        options.jobs = args.jobs
    print(regrade(Path(args.submissions), Path(args.out), args.student, options).text())
    return 0


def _export(args: argparse.Namespace) -> int:
    from grader.export import export

    ids = {}
    for value in args.canvas_assignment_id or []:
        name, _, ident = value.rpartition("=") if "=" in value else ("*", "", value)
        if not ident.strip().isdigit():
            raise UsageError(f"--canvas-assignment-id {value!r}: expected Canvas's numeric assignment id "
                             "(the number after /assignments/ in its address), or ASSIGNMENT=ID.")
        ids[name] = ident.strip()
    summary = export([Path(o) for o in args.out], args.lms, Path(args.roster) if args.roster else None,
                     Path(args.to) if args.to else None, include_flagged=args.include_flagged,
                     canvas_ids=ids)
    print(summary.text())
    return 0


def _feedback(args: argparse.Namespace) -> int:
    from grader.export import feedback_bundles

    print(feedback_bundles(Path(args.out), Path(args.to) if args.to else None).text())
    return 0


def _merge(args: argparse.Namespace) -> int:
    from grader.merge import merge

    path = merge([Path(p) for p in args.outputs], Path(args.out))
    print(f"merged {len(args.outputs)} shard outputs into {path}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from grader.report import report_out

    out = Path(args.out)
    if not (out / "results").is_dir():
        raise UsageError(f"{out} has no results/: give the --out folder of autograde (or of merge).")
    print(f"wrote {report_out(out)} and {out / 'report.csv'}")
    return 0


def _gradebook(args: argparse.Namespace) -> int:
    from grader.gradebook import import_run

    summary = import_run(Path(args.out), db_url=args.db)
    print(summary.text())
    return 0


def _new_exercise(args: argparse.Namespace) -> int:
    from grader.paths import course_root
    from grader.scaffold import new_exercise, next_steps

    root = course_root()
    written = new_exercise(args.section, args.name, args.kind, root)
    print(next_steps(args.section, args.name, written, root))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="regenerate notebooks/ from solutions/")
    generate.add_argument("assignments", nargs="*", help="assignment folders (default: all)")
    generate.add_argument("--force", action="store_true",
                          help="overwrite learner notebooks even if they have uncommitted edits")
    generate.set_defaults(run=_generate)

    verify = commands.add_parser("verify", help="re-check saved records in a clean process")
    verify.add_argument("records", help="folder of *.record.pt files")
    verify.set_defaults(run=_verify)
    bundle = commands.add_parser("student-bundle", help="build the public student release")
    bundle.add_argument("out", help="new or empty folder, or the folder (a checkout of the "
                        "student repository) of an earlier release, to add the next sections to")
    bundle.add_argument("--through", metavar="SECTION",
                        help="publish the sections up to and including this one, e.g. 10.3 "
                        "(default: all); published notebooks are never rewritten")
    bundle.add_argument("--repository", default=None,
                        help="GitHub owner/name the release is published as (badges, and "
                        "where the notebooks fetch the helpers from on Colab); required for a "
                        "new release, taken from the earlier one when adding sections")
    bundle.add_argument("--branch", default="main", help="branch of that repository")
    bundle.set_defaults(run=_student_bundle)

    grade = commands.add_parser(
        "autograde", help="grade a whole class: grades.csv and feedback",
        description="Grade <student>/<assignment>/<notebook>.ipynb submissions (a folder or a "
                    "zip) with nbgrader: hidden tests restored from solutions/, integrity "
                    "records verified, learner code sandboxed. See docs/grading.md.")
    grade.add_argument("submissions", help="folder (nbgrader's submitted/ layout) or zip")
    grade.add_argument("--out", required=True, help="output folder (reruns resume in it)")
    grade.add_argument("--jobs", type=int, default=0,
                       help="notebooks graded at once (default: one per CPU)")
    grade.add_argument("--timeout", type=int, default=60, help="seconds per cell (default 60)")
    grade.add_argument("--notebook-timeout", type=int, default=0,
                       help="seconds per notebook, whole (default: 6 x timeout + 180)")
    grade.add_argument("--shard", default="1/1", help="grade slice K of N (K/N), then merge")
    grade.add_argument("--force", action="store_true",
                       help="regrade unchanged submissions, also with another deadline than before")
    grade.add_argument("--deadline", action="append", metavar="[ASSIGNMENT=]ISO",
                       help="due date, for lateness from nbgrader's timestamp.txt (repeatable)")
    grade.add_argument("--assignment", action="append",
                       help="grade only this assignment (repeatable; default: all found)")
    grade.add_argument("--submitted-at", metavar="FILE",
                       help="CSV of an LMS zip's submission times (LMS id, submitted_at or Moodle's "
                            "'Last modified (submission)'), for late penalties (docs/adopting.md)")
    grade.add_argument("--memory-mb", type=int, default=4096,
                       help="memory limit of each kernel process (default 4096)")
    grade.add_argument("--sandbox-user", default="nobody",
                       help="user kernels run as when grading as root (default nobody)")
    grade.add_argument("--no-sandbox-user", action="store_true",
                       help="run kernels as the grader's own user")
    grade.add_argument("--allow-network", action="store_true",
                       help="do not put kernels in a network namespace")
    grade.add_argument("--no-file-sandbox", action="store_true",
                       help="do not isolate kernels' files with bubblewrap (the grader then checks "
                            "its own files after every notebook)")
    grade.add_argument("--require-sandbox", action="store_true",
                       help="refuse to grade unless bubblewrap isolates every kernel (clusters)")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    grade.set_defaults(run=_autograde)

    merge = commands.add_parser("merge", help="combine sharded autograde outputs")
    merge.add_argument("outputs", nargs="+", help="the --out folders of every shard")
    merge.add_argument("--out", required=True, help="where the merged output goes")
    merge.set_defaults(run=_merge)

    report = commands.add_parser(
        "report", help="the class report of an autograde run (report.html, report.csv)",
        description="Write OUT/report.html (one self-contained page: score histograms, the "
                    "shares of full marks per exercise, the named mistakes most frequent first "
                    "with the submissions that made each, the rows to review, grading time) and "
                    "OUT/report.csv from OUT's results. autograde and merge write it too.")
    report.add_argument("out", help="the --out folder of autograde (or of merge)")
    report.set_defaults(run=_report)

    gradebook = commands.add_parser(
        "gradebook", help="import an autograde run into the course's nbgrader gradebook",
        description="Import OUT (a finished or merged autograde run) into the course's "
                    "gradebook.db: students, submissions, autograded scores, integrity "
                    "corrections as manual scores, flags as comments for formgrader. Run it "
                    "again after a regrade: manual scores entered by hand are kept.")
    gradebook.add_argument("out", help="the --out folder of autograde (or of merge)")
    gradebook.add_argument("--db", help="gradebook URL (default: sqlite:///<course>/gradebook.db)")
    gradebook.set_defaults(run=_gradebook)

    again = commands.add_parser(
        "regrade", help="grade named students again; everyone else's rows are kept",
        description="Grade the named students' submissions again into OUT (an earlier autograde "
                    "run of the class, whose settings it reuses), after a fixed file or an "
                    "accepted appeal. Every other row stays as it was; what the named students "
                    "had before (results, feedback, graded notebooks, grades.csv) is kept in "
                    "OUT/previous/<UTC time>/.")
    again.add_argument("submissions", help="the folder or zip the class was graded from (or a "
                       "newer one holding the students' fixed files)")
    again.add_argument("--out", required=True, help="the --out folder of the earlier run")
    again.add_argument("--student", action="append", required=True,
                       help="the student to regrade (repeatable)")
    again.add_argument("--jobs", type=int, default=0, help="notebooks graded at once")
    again.add_argument("--quiet", action="store_true", help="no progress bar")
    again.set_defaults(run=_regrade)

    lms = commands.add_parser(
        "export", help="grades as Canvas's or Moodle's grade import reads them",
        description="Write OUT/<lms>-grades.csv (or --to FILE): the score after late penalties "
                    "of every student, one column per assignment, in the columns of the LMS's "
                    "gradebook import. Students missing from the roster, roster rows without a "
                    "submission, flagged rows and rows the grader failed on are listed.")
    lms.add_argument("out", nargs="+", help="the --out folder(s) of autograde (or of merge); "
                     "several: one column per assignment of them all")
    lms.add_argument("--lms", required=True, choices=["canvas", "moodle"])
    lms.add_argument("--roster", help="CSV with student_id and the LMS's ids (Canvas: canvas_id, "
                     "not needed for a class graded from a Canvas zip; Moodle: email or id_number, "
                     "and participant_id instead of student_id: its grading worksheet as it is)")
    lms.add_argument("--to", help="the CSV to write (default OUT/<lms>-grades.csv)")
    lms.add_argument("--canvas-assignment-id", action="append", metavar="[ASSIGNMENT=]ID",
                     help="Canvas's id of the assignment to fill (column 'NAME (ID)'; repeatable)")
    lms.add_argument("--include-flagged", action="store_true",
                     help="export flagged rows' scores too (by default their cells stay empty)")
    lms.set_defaults(run=_export)

    bundles = commands.add_parser(
        "feedback", help="the feedback pages as one zip per student, to upload or send",
        description="Write OUT/feedback-bundles/<student>.zip (or into --to DIR), and for a class "
                    "graded from a Canvas or Moodle zip canvas-<assignment>.zip or "
                    "moodle-<assignment>.zip for the LMS's bulk upload of feedback files. "
                    "Students whose submissions have no feedback page are listed.")
    bundles.add_argument("out", help="the --out folder of autograde (or of merge)")
    bundles.add_argument("--to", help="folder for the zips (default OUT/feedback-bundles)")
    bundles.set_defaults(run=_feedback)

    scaffold = commands.add_parser(
        "new-exercise", help="a new exercise's files and notebook cells, placeholders to fill",
        description="Write a new exercise of SECTION: its visible module (course/visible/), its "
                    "hidden check (grader/checks/), its answers (tests/answers/) and its cells in the "
                    "solution notebook, with placeholders that fail the tests until they are "
                    "filled. Refuses a name the course has. See docs/course.md, \"Adding an "
                    "exercise\".")
    scaffold.add_argument("section", help="the section, e.g. 10.5")
    scaffold.add_argument("name", help="the learner-facing name: a function (double) or a class (LayerNorm)")
    scaffold.add_argument("--kind", required=True, choices=["function", "module"],
                          help="a function the learner writes, or an nn.Module class")
    scaffold.set_defaults(run=_new_exercise)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; a problem the user can fix is one line on stderr and exit 1 or 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except GraderError as error:
        print(f"{args.command}: {error}", file=sys.stderr)
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
