"""Grade one Gradescope submission: what ``run_autograder`` runs, once per submission.

    python -m grader.instructor.gradescope.run [--root /autograder] [--self-test]

The root (``$AUTOGRADER_ROOT``, else /autograder) is laid out as Gradescope lays it out:
``source/`` (the unpacked zip: autograder.json, the secret, course/), ``submission/`` (the
upload), ``submission_metadata.json`` (who submitted) and ``results/``. The submission is
graded on public and hidden cases exactly as ``grader grade`` grades it; results.json is
checked against Gradescope's documented format and written atomically.

Outcomes: a graded submission, or one the student must fix (no file, an unreadable file,
a group submission of lesson 6), is a results.json and exit 0. When the autograder itself
cannot grade (its own files, the metadata, a grader failure), results.json says so
without a grade, the details go to stdout (shown to instructors only) and the exit is 1.

``--self-test`` (run by setup.sh when Gradescope builds the image) grades the reference
solution (lesson 6: the reference answer to a made-up student's incident) and fails unless
it earns full marks, so a broken image fails its build, not a student's submission.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT_VARIABLE = "AUTOGRADER_ROOT"
CONFIG = "autograder.json"
SECRET = "secret"
SELF_TEST_STUDENT = "gradescope-self-test"
UNCONFINED_ADVICE = ("Gradescope's container here runs neither bubblewrap (setup.sh installs it) "
                     "nor a kernel with Landlock: grade this lesson outside Gradescope, with "
                     "`grader grade` on a machine where it does not refuse (docs/security.md)")


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def submission(self) -> Path:
        return self.root / "submission"

    @property
    def metadata(self) -> Path:
        return self.root / "submission_metadata.json"

    @property
    def results(self) -> Path:
        return self.root / "results" / "results.json"


class AutograderError(Exception):
    """The autograder cannot grade (not the student's doing): one line."""


class NotGradable(Exception):
    """The student must fix their submission first: one line they can act on."""


def _config(layout: Layout) -> dict:
    try:
        return json.loads((layout.source / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AutograderError(f"{layout.source / CONFIG} is unreadable ({e}); rebuild the "
                              f"autograder with `grader gradescope`") from None


def student_of(layout: Layout, key: str) -> str:
    """The submitter's id (``key`` of its only user) from submission_metadata.json."""
    try:
        users = json.loads(layout.metadata.read_text(encoding="utf-8"))["users"]
        if not isinstance(users, list):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise AutograderError(f"{layout.metadata}: no list of users to tell whose incident to grade "
                              f"({type(e).__name__})") from None
    if not users:
        # Gradescope lists the submitter at least: no user is the metadata's fault, not a
        # group to be told "each of you submits alone".
        raise AutograderError(f"{layout.metadata}: lists no user, so no student whose incident "
                              f"to grade")
    if len(users) != 1:
        ids = ", ".join(str(u.get(key, "?")) for u in users if isinstance(u, dict))
        raise NotGradable(f"this lesson is individual (each student diagnoses their own incident), "
                          f"and this submission lists {len(users)} students ({ids}); each of you "
                          f"submits alone")
    student = users[0].get(key) if isinstance(users[0], dict) else None
    if not isinstance(student, (str, int)) or isinstance(student, bool) or str(student) == "":
        raise AutograderError(f"{layout.metadata}: the user has no {key!r} (the autograder names "
                              f"students by it; rebuild with another --student-key)")
    return str(student)


def _lock_down(layout: Layout) -> None:
    """Only root may read the root's files: the secret, the reference solutions, the upload
    and results. A wall behind the sandbox's own: its child runs as nobody, so where
    bubblewrap cannot hide them (an unprivileged container), permissions do as well as
    Landlock."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        for folder in (layout.root, layout.source):
            try:
                os.chmod(folder, 0o700)
            except OSError:
                pass


def grade(layout: Layout, config: dict, work: Path) -> dict:
    """results.json of the submission in ``layout``."""
    from grader.engine.checks import REGISTRY
    from grader.engine.code_file import lesson_functions
    from grader.engine.errors import InputError
    from grader.engine.layout import Course
    from grader.engine.pipeline import folder_files, grade_submission
    from grader.engine.rubric import load_rubric
    from grader.engine.sandbox.session import Unconfined
    from grader.engine.secret import SecretError, load_secret
    from grader.engine.submission import load_submission
    from grader.instructor.gradescope import results, upload
    from grader.lessons import lesson_module

    lesson = config["lesson"]
    course = Course(layout.source / "course")
    try:
        secret = load_secret(layout.source / SECRET)
        lesson_module(lesson)
        rubric = load_rubric(course.rubric_path(lesson), REGISTRY)
    except (SecretError, InputError) as e:
        raise AutograderError(str(e)) from None
    files = folder_files(lesson)
    try:
        if files is None:
            functions = lesson_functions(course.assignment(lesson) / "exercise.py")
            picked = upload.pick_code(layout.submission, lesson, functions)
            student = ""
        else:
            student = student_of(layout, config.get("student_key", "email"))
            picked = upload.pick_folder(layout.submission, lesson, files, work / "submission")
        if isinstance(picked, upload.Missing):
            raise NotGradable(picked.why)
        try:
            submission = load_submission(picked.path, files, student)
        except InputError as e:
            raise NotGradable(f"{picked.shown}: {e.message}") from None
    except NotGradable as e:
        return results.not_graded(rubric, str(e), build=config)
    try:
        report = grade_submission(lesson, submission, course, mode="grade", secret=secret, rubric=rubric)
    except Unconfined as e:
        # The secret and the solutions are in this container: no learner code runs here
        # unless the sandbox confines it, and there is no flag to grade at that risk, so the
        # advice is Gradescope's, not the command line's (which names that flag).
        raise AutograderError(
            f"this image cannot confine a submission, so it grades none ({e.describe}; it lacks "
            f"{e.lacks}). {UNCONFINED_ADVICE}") from None
    notes = picked.notes
    if files is not None:
        notes += folder_notes(submission, course, secret, student, config.get("student_key", "email"))
    return results.from_report(report, graded=picked.shown, notes=notes, build=config)


def folder_notes(submission, course, secret: bytes, student: str, key: str) -> tuple[str, ...]:
    """Lesson 6: notes shown at once, where every criterion waits for publishing (each is
    judged on the student's own incident). What they say depends on nothing hidden:

    - a file that cannot be read (not YAML, not UTF-8, too large, off its schema, missing):
      the student saw their points and no reason until grades were published;
    - a diagnosis naming another incident than the one drawn for the submitter's Gradescope
      id: incidents are handed out under ids the instructor typed, and where Gradescope
      spells the id otherwise (a capital letter in an email) a right diagnosis is graded
      against another incident. Both ids are the student's own to know."""
    from grader.course.incident import incidents_key, student_incident
    from grader.engine.text import one_line
    from grader.lessons.lesson6 import parse_submission, same_incident_id, unusable
    handed = parse_submission(submission, course)
    said = (handed.diagnosis or {}).get("incident")
    drawn = student_incident(course, incidents_key(secret), student).id
    if not isinstance(said, str) or same_incident_id(drawn, said):
        return unusable(handed)
    said = repr(one_line(said, 40))
    return unusable(handed) + (
        f"your diagnosis names incident {said}, but the incident drawn for your Gradescope {key} "
        f"{student!r} is {drawn!r}, and yours is graded against it: if {said} is the incident you "
        f"were handed, your instructor handed it out under another id than Gradescope's; tell "
        f"them before the deadline",)


def write(path: Path, data: dict) -> None:
    from grader.instructor.gradescope.results import problems
    bad = problems(data)
    if bad:      # Gradescope would refuse the file: say where it departs, in the log
        raise AutograderError(f"results.json departs from Gradescope's format: {'; '.join(bad[:3])}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def self_test(layout: Layout, config: dict) -> int:
    """Grade the reference (lesson 6: the reference answer to a made-up student's incident)
    as a submission would be graded; 0 only at full marks."""
    lesson = config["lesson"]
    with tempfile.TemporaryDirectory(prefix="self-test-") as tmp:
        test = Layout(Path(tmp))
        solutions = layout.source / "course" / "reference" / "solutions"
        from grader.engine.pipeline import folder_files
        if folder_files(lesson) is None:
            test.submission.mkdir(parents=True)
            (test.submission / "my_solution.py").write_bytes((solutions / f"{lesson}.py").read_bytes())
        else:
            from grader.course.bundle import write_answer
            from grader.course.incident import incidents_key, student_incident
            from grader.engine.layout import Course
            from grader.engine.secret import load_secret
            key = incidents_key(load_secret(layout.source / SECRET))
            write_answer(student_incident(Course(layout.source / "course"), key, SELF_TEST_STUDENT),
                         test.submission)
            test.metadata.write_text(json.dumps(
                {"users": [{config.get("student_key", "email"): SELF_TEST_STUDENT}]}), encoding="utf-8")
        (test.root / "source").symlink_to(layout.source)
        # A work folder of its own, as a submission's grade has: lesson 6's picked files are
        # copied to work/submission, which here would be the upload itself.
        data = grade(test, config, Path(tmp) / "work")
        write(test.results, data)
    full = sum(t["max_score"] for t in data.get("tests", []))
    print(data["output"])
    ok = bool(data.get("tests")) and data["score"] == full
    print(f"self-test: the reference scores {data['score']:g} / {full:g}: "
          f"{'ok' if ok else 'FAILED: this image cannot grade ' + lesson}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="run_autograder", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", help=f"Gradescope's /autograder (default: ${ROOT_VARIABLE}, else /autograder)")
    p.add_argument("--self-test", action="store_true", help="grade the reference solution; 0 at full marks")
    args = p.parse_args(argv)
    layout = Layout(Path(args.root or os.environ.get(ROOT_VARIABLE) or "/autograder"))
    from grader.instructor.gradescope.results import failed
    if args.self_test:
        try:
            return self_test(layout, _config(layout))
        except Exception as e:
            if not isinstance(e, AutograderError):
                traceback.print_exc(file=sys.stdout)
            print(f"self-test: FAILED: this image cannot grade: {e}")
            return 1
    _lock_down(layout)
    code = 0
    try:
        config = _config(layout)
        with tempfile.TemporaryDirectory(prefix="grading-") as tmp:
            data = grade(layout, config, Path(tmp))
    except AutograderError as e:
        print(f"run_autograder: {e}")
        data, code = failed(str(e)), 1
    except Exception as e:          # a grader failure: the log has it, the student is told
        traceback.print_exc(file=sys.stdout)
        data, code = failed(f"the grader failed ({type(e).__name__})"), 1
    try:
        write(layout.results, data)
    except AutograderError as e:
        print(f"run_autograder: {e}")
        write(layout.results, failed("its results were malformed"))
        return 1
    print(data["output"])
    return code


if __name__ == "__main__":
    sys.exit(main())
