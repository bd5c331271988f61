"""`grader gradescope`: the autograder zip Gradescope builds its grading image from.

The zip's root (Gradescope unpacks it into /autograder/source):

    setup.sh            run once when Gradescope builds the image (installs, then a self-test)
    run_autograder      run for every submission
    requirements.txt    the grader's dependencies, pinned to the versions installed here
    autograder.json     the lesson, how a student is named, the grader version, the course digest
    secret              the instructor secret: hidden cases are drawn from it
    course/             pyproject.toml, grader/, reference/ (with the solutions), rubrics/, assignments/

The same course, lesson and secret give the same bytes (entries sorted, fixed timestamps),
so a rebuilt zip can be compared with the one uploaded. The zip holds the secret and the
reference solutions: upload it to Gradescope and keep it where only instructors are.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from grader import __version__
from grader.engine.errors import InputError
from grader.engine.layout import Course
from grader.engine.secret import load_secret
from grader.instructor.outputs import AUTOGRADER, cannot_write, course_outputs, refuse_to_replace, write_whole

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parents[2]           # where grader/ and reference/ are
DISTRIBUTION = "serving-grader"
STUDENT_KEYS = ("email", "sid", "id")     # fields of a user in Gradescope's submission_metadata.json
_EPOCH = (1980, 1, 1, 0, 0, 0)            # the earliest time a zip can hold: no build time leaks in
_SKIP = {"__pycache__", ".ipynb_checkpoints"}


@dataclass(frozen=True)
class Built:
    path: Path
    lesson: str
    files: int
    size: int
    course_digest: str
    requirements: tuple[str, ...]

    def render(self) -> str:
        return (f"wrote {self.path} ({self.files} files, {self.size / 1024:.0f} KiB) for {self.lesson}; "
                f"course digest {self.course_digest[:16]}; {len(self.requirements)} pinned packages.\n"
                f"It holds the instructor secret and the reference solutions: upload it to "
                f"Gradescope (Configure Autograder, zip file upload) and share it with no one else.")


def pinned_requirements(distribution: str = DISTRIBUTION) -> tuple[str, ...]:
    """name==version of every package ``distribution`` needs (no extras), as installed here,
    where the tests pass with them."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    todo = [distribution]
    while todo:
        name = todo.pop()
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            raise InputError(name, "not installed here, so its version cannot be pinned "
                                   "(pip install -e . in the course first)") from None
        for text in requires:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            key = canonicalize_name(req.name)
            if key not in pins and key != canonicalize_name(distribution):
                try:
                    pins[key] = metadata.version(req.name)
                except metadata.PackageNotFoundError:
                    raise InputError(req.name, f"needed by {name} but not installed here") from None
                todo.append(req.name)
    return tuple(f"{name}=={version}" for name, version in sorted(pins.items()))


def _course_files(course: Course) -> list[tuple[str, Path]]:
    """(name in the zip, file) of the course copy: the grader and reference packages this
    grader runs from, the course's rubrics and assignments, the pyproject."""
    roots = [("grader", PACKAGE_ROOT / "grader"), ("reference", PACKAGE_ROOT / "reference"),
             ("rubrics", course.root / "rubrics"), ("assignments", course.root / "assignments")]
    out = []
    for name, root in roots:
        for here, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
            for f in sorted(files):
                path = Path(here) / f
                if f.startswith(".") or path.suffix == ".pyc" or not path.is_file():
                    continue
                out.append((f"course/{name}/{path.relative_to(root).as_posix()}", path))
    pyproject = PACKAGE_ROOT / "pyproject.toml"
    if pyproject.is_file():
        out.append(("course/pyproject.toml", pyproject))
    return sorted(out)


def refuse_instructor_outputs(course: Course, files: list[tuple[str, Path]]) -> None:
    """What an instructor's command saved in the course's folders (a gradebook, a CSV export,
    feedback pages, a class report, an earlier autograder zip, an answer key), told by its bytes as the
    release tells it: zipped with the lesson's files, every student's grades and hidden-case
    feedback went to Gradescope and into every grading container, and a zip saved in
    assignments/ went into the next one. Refused, naming each, before anything is written."""
    found = course_outputs((name.removeprefix("course/"), Path(os.path.realpath(path))) for name, path in files
                           if name.startswith(("course/assignments/", "course/rubrics/")))
    if found:
        raise InputError(str(course.root), "the course's folders hold what an instructor's "
                         "command wrote, which would go into the zip and to Gradescope: "
                         + "; ".join(found[:5]) + "; move them out of the course's folders")


def _digest(entries: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for name, data in entries:
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def build_autograder(course: Course, lesson: str, secret_file: str, out: Path, *,
                     student_key: str = "email") -> Built:
    from grader.engine.code_file import lesson_functions
    from grader.engine.pipeline import build_cases, folder_files
    from grader.engine.rubric import load_rubric
    from grader.engine.checks import REGISTRY
    from grader.lessons import lesson_module

    course.require_lesson(lesson)
    if student_key not in STUDENT_KEYS:
        raise InputError("--student-key", f"one of {', '.join(STUDENT_KEYS)}")
    secret = load_secret(secret_file)
    lesson_module(lesson)
    rubric = load_rubric(course.rubric_path(lesson), REGISTRY)     # a broken rubric stops here
    # What the zip's setup and every grade will need, checked here rather than in
    # Gradescope's image build after the upload: the cases (the probe file, the families,
    # the worker) and the stub that tells a student's several files apart.
    build_cases(lesson, course, secret)
    if folder_files(lesson) is None:
        lesson_functions(course.assignment(lesson) / "exercise.py")
    out = Path(out)
    if out.is_dir():
        raise InputError(str(out), "is a folder; give the zip file to write, e.g. autograder.zip")
    refuse_to_replace(out, AUTOGRADER)

    files = _course_files(course)
    refuse_instructor_outputs(course, files)
    course_entries = [(name, path.read_bytes()) for name, path in files]
    digest = _digest(course_entries)
    requirements = pinned_requirements()
    config = {"lesson": lesson, "title": rubric.title, "grader_version": __version__,
              "student_key": student_key, "course_digest": digest,
              "submission": "folder" if folder_files(lesson) is not None else "file"}
    entries = [
        ("setup.sh", (HERE / "setup.sh").read_bytes(), 0o755),
        ("run_autograder", (HERE / "run_autograder").read_bytes(), 0o755),
        ("requirements.txt", ("".join(f"{r}\n" for r in requirements)).encode(), 0o644),
        ("autograder.json", (json.dumps(config, indent=2, sort_keys=True) + "\n").encode(), 0o644),
        ("secret", secret, 0o600),
    ] + [(name, data, 0o644) for name, data in course_entries]

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = (0o100000 | mode) << 16      # a regular file with these permissions
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_whole(out, buffer.getvalue(), mode=0o600)      # 0600: the zip holds the secret
    except OSError as e:
        raise cannot_write(out, "the autograder zip", e) from None
    return Built(out, lesson, len(entries), len(buffer.getvalue()), digest, requirements)
