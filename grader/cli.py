"""The ``grader`` command: a thin layer over the pipeline.

Exit codes: 0 when grading ran (whatever the score), 2 for a usage or input error
(one line naming the file or field), 1 if the grader itself failed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grader import __version__
from grader.course import find_course
from grader.errors import InputError
from grader.report import render
from grader.secret import SecretError, load_secret
from reference.specs import SpecError
from reference.units import UnitError
from reference.workload import WorkloadError

EXAMPLES = """examples:
  grader check lesson1                          check assignments/lesson1/exercise.py (public cases)
  grader check lesson1 --submission my.ipynb --json
  grader grade lesson1 alice.py bob.py --secret-file course.secret --json
"""

INPUT_ERRORS = (InputError, SecretError, SpecError, UnitError, WorkloadError)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grader", epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Grade exercises of 'Serving under pressure: from "
                                            "admission to release' against the reference worker.")
    p.add_argument("--version", action="version", version=f"grader {__version__}")
    p.add_argument("--course", help="the course folder (default: found from the working directory)")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="grade your exercise on the public cases (about a second)",
                       epilog="example: grader check lesson1 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("lesson", help="lesson1 .. lesson6")
    c.add_argument("--submission", help="a .py or .ipynb file (default: assignments/LESSON/exercise.py)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")

    g = sub.add_parser("grade", help="grade submissions on public and hidden cases (instructors)",
                       epilog="example: grader grade lesson1 alice.py --secret-file course.secret",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("lesson")
    g.add_argument("paths", nargs="+", help="submission files (.py or .ipynb)")
    g.add_argument("--secret-file", required=True,
                   help="the instructor secret that draws the hidden cases")
    g.add_argument("--json", action="store_true",
                   help="print each report as one JSON object per line")
    return p


def _emit(report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), sort_keys=True))
    else:
        print(render(report))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from grader.pipeline import grade_path   # after parsing: --help and --version stay instant
    try:
        course = find_course(args.course)
        course.require_lesson(args.lesson)
        if args.command == "check":
            path = Path(args.submission) if args.submission else course.assignment(args.lesson) / "exercise.py"
            _emit(grade_path(args.lesson, path, course, mode="check"), args.json)
        else:
            secret = load_secret(args.secret_file)
            for path in args.paths:
                try:
                    report = grade_path(args.lesson, Path(path), course, mode="grade", secret=secret)
                except InputError as e:
                    # One unreadable submission must not stop the others.
                    print(f"grader: {e}", file=sys.stderr)
                    if len(args.paths) == 1:
                        return 2
                    continue
                _emit(report, args.json)
        return 0
    except INPUT_ERRORS as e:
        print(f"grader: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
