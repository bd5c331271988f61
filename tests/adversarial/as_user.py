"""Run by tests/adversarial/test_as_user.py as a throwaway unprivileged user: grade a class
of every attack (and one honest submission) the way `grader grade` does, with the attack
suite's short limits, and print each student's report as one JSON line.

    python as_user.py CONFIG.json      (course_root, class, gradebook, secret_file, targets)
"""
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

PLACEHOLDER = "TARGETS = {}  # the test writes the real paths here"


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    root = Path(config["course_root"])
    sys.path[:0] = [str(root)]
    from grader.engine.layout import find_course
    from grader.engine.sandbox import session
    from grader.instructor.batch import run_batch
    from grader.instructor.gradebook import open_gradebook

    session.DEFAULT_LIMITS = replace(session.DEFAULT_LIMITS, call_timeout_s=0.3, run_timeout_s=1.0,
                                     load_timeout_s=2.0, memory_bytes=256 << 20)
    targets = dict(config["targets"], grader_pid=os.getpid())
    folder = Path(config["class"])
    for name, source in config["submissions"].items():
        (folder / f"{name}.py").write_text(source.replace(PLACEHOLDER, f"TARGETS = {targets!r}"))
    secret = Path(config["secret_file"]).read_bytes().strip()
    with open_gradebook(config["gradebook"]) as book:
        summary = run_batch("lesson1", folder, find_course(str(root)), secret, book, jobs=1,
                            progress=False)
        for result in book.results():
            print(json.dumps({"student": result.student, "report": result.report}))
    print(json.dumps({"summary": summary.to_dict()}))


if __name__ == "__main__":
    main(sys.argv[1])
