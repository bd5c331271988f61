"""A class of 200, graded as an instructor would, by hand (not in the tests: it takes
minutes, and the test suite must keep a wide margin under CI's time limit).

    python bench/class_of_200.py [--lesson lesson1|lesson2] [--students 200] [--keep DIR]

The same checks as tests/test_batch.py's class of every kind, on a class of 200 generated
by tests/classroom.py (the reference, alternative correct, wrong, raising and looping
submissions): killed once with SIGKILL mid-run and resumed, every student graded exactly
once with their template's scores, exported to csv and nbgrader with
nbgrader's totals equal to the grader's. Prints how long each step took.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from classroom import check_class, templates  # noqa: E402  (a test helper, shared on purpose)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lesson", default="lesson1", choices=("lesson1", "lesson2"))
    p.add_argument("--students", type=int, default=200)
    p.add_argument("--keep", metavar="DIR", help="grade in DIR and keep it (default: a temp folder)")
    args = p.parse_args()
    from grader.engine.layout import find_course
    from grader.engine.pipeline import grade_path
    secret = b"bench-secret-for-hidden-cases"
    course = find_course(str(ROOT))
    expected = {name: {c.id: c.score for c in grade_path(args.lesson, path, course, mode="grade",
                                                        secret=secret).criteria}
                for name, path in templates(args.lesson).items()}
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="class-of-200-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        (tmp / "course.secret").write_bytes(secret)
        timings = check_class(args.lesson, args.students, tmp, tmp / "course.secret", expected)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for step, seconds in timings.items():
        print(f"{args.lesson}, {args.students} students: {step}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
