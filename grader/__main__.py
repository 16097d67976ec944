"""Command line of the course's grading tools: ``python -m grader COMMAND ...``.

Commands:
  generate   regenerate notebooks/ from solutions/ with nbgrader
  verify     re-check saved records in a clean process (see grader.integrity)
  student-bundle  build the public student release (notebooks, helpers, data, badges)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _generate(args: argparse.Namespace) -> int:
    from grader.release import generate

    for name in generate(args.assignments or None, force=args.force):
        print(f"generated notebooks/{name}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from grader.integrity import verify_records

    verdicts = verify_records(Path(args.records))
    print(json.dumps({k: {"passed": v.passed, "flags": list(v.flags)} for k, v in verdicts.items()},
                     indent=1))
    return 0


def _student_bundle(args: argparse.Namespace) -> int:
    from grader.bundle import build_student_bundle

    out = build_student_bundle(Path(args.out), repository=args.repository, branch=args.branch)
    print(f"student release written to {out} (no solutions, hidden tests or checks inside)")
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
    bundle.add_argument("out", help="new or empty folder to write the release into")
    bundle.add_argument("--repository", default="transformer-course/transformer-course",
                        help="GitHub owner/name the release is published as (for the badges)")
    bundle.add_argument("--branch", default="main", help="branch the badges point at")
    bundle.set_defaults(run=_student_bundle)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
