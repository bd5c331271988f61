"""The Gradescope autograder: the zip `grader gradescope` builds, unpacked into a folder laid
out as Gradescope's /autograder, and its run_autograder run there as Gradescope runs it, on
the reference, the stub, a crashing and a looping submission, a missing file, hostile
uploads and lesson 6's per-student incidents. Every results.json is validated against
Gradescope's documented results format (grader/instructor/gradescope/results.schema.json)."""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

from conftest import ROOT, SECRET, SUBMISSIONS, grade, run_grader, without_landlock
from grader.course.bundle import write_answer
from grader.course.incident import incidents_key, student_incident
from grader.engine.layout import find_course
from grader.instructor.gradescope import upload

SCHEMA = json.loads((ROOT / "grader" / "instructor" / "gradescope" / "results.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
REFERENCE = ROOT / "reference" / "solutions" / "lesson1.py"
STUB = ROOT / "assignments" / "lesson1" / "exercise.py"
COURSE = find_course(str(ROOT))


def schema_errors(results: dict) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(results)]


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "course.secret"
    path.write_bytes(SECRET + b"\n")
    return path


def build(lesson: str, secret_file: Path, out: Path, *extra: str) -> Path:
    code, stdout, err = run_grader("gradescope", lesson, "--secret-file", str(secret_file),
                                   "--out", str(out), *extra)
    assert code == 0, err
    assert "secret" in stdout and str(out) in stdout
    return out


@pytest.fixture(scope="module")
def lesson1_zip(tmp_path_factory, secret_file):
    return build("lesson1", secret_file, tmp_path_factory.mktemp("zip") / "lesson1-autograder.zip")


@pytest.fixture(scope="module")
def lesson6_zip(tmp_path_factory, secret_file):
    return build("lesson6", secret_file, tmp_path_factory.mktemp("zip6") / "lesson6.zip")


def unpack(zip_path: Path, root: Path) -> Path:
    """Gradescope's layout: the zip's contents in source/ (modes kept, as unzip keeps
    them), run_autograder copied to the root, empty submission/ and results/."""
    source = root / "source"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(source)
        for info in z.infolist():
            os.chmod(source / info.filename, (info.external_attr >> 16) & 0o7777)
    shutil.copy2(source / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


def submit(root: Path, files: dict[str, bytes], users=({"email": "alice@example.edu", "id": 1},)):
    for name, data in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    if users is not None:
        (root / "submission_metadata.json").write_text(json.dumps(
            {"id": 1, "created_at": "2025-01-01T00:00:00Z", "users": list(users),
             "assignment": {"title": "lesson", "id": 1}, "previous_submissions": []}))


def run_autograder(root: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """run_autograder as Gradescope runs it (its working directory the root), the root moved
    by AUTOGRADER_ROOT and the interpreter by GRADER_PYTHON; (process, results.json)."""
    p = subprocess.run([str(root / "run_autograder"), *args], cwd=root, capture_output=True,
                       text=True, timeout=600,
                       env={**os.environ, "AUTOGRADER_ROOT": str(root),
                            "GRADER_PYTHON": sys.executable, **(env or {})})
    results = root / "results" / "results.json"
    return p, (json.loads(results.read_text()) if results.exists() else {})


def graded(zip_path: Path, tmp_path: Path, files: dict[str, bytes], **kw):
    root = unpack(zip_path, tmp_path / "autograder")
    submit(root, files, **kw)
    p, results = run_autograder(root)
    assert not schema_errors(results), (schema_errors(results), p.stdout, p.stderr)
    return p, results


def by_id(results: dict) -> dict[str, dict]:
    return {t["name"].split(":")[0]: t for t in results["tests"]}


# ---- the schema is Gradescope's documented format -------------------------------------------------
DOCUMENTED_EXAMPLE = {       # the example of Gradescope's autograder specification, as data
    "score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
    "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
    "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
    "tests": [{"score": 2.0, "max_score": 2.0, "name": "Your name here", "name_format": "text",
               "number": "1.1", "output": "Giant multiline string", "output_format": "text", "tags": ["tag1", "tag2", "tag3"],
               "visibility": "visible", "extra_data": {}}],
    "leaderboard": [{"name": "Accuracy", "value": 0.926}, {"name": "Time", "value": 15.1, "order": "asc"},
                    {"name": "Stars", "value": "*****"}],
}


@pytest.mark.parametrize("change", [
    {"visibility": "after_publish"},                        # not one of the four settings
    {"score": "44"},                                        # a number, not a string
    {"tests": [{"name": "t", "score": 1, "visibility": "secret"}]},
    {"tests": [{"name": "t", "score": 1, "status": "ok"}]},
    {"tests": [{"name": "t", "score": 1, "number": 1}]},    # the number is a string: "1.1"
    {"scores": 1.0},                                        # a typo Gradescope would ignore
    {"output_format": "markdown"},                          # md is its name for Markdown
])
def test_the_schema_takes_the_documented_example_and_refuses_departures(change):
    assert schema_errors(DOCUMENTED_EXAMPLE) == []
    assert schema_errors({**DOCUMENTED_EXAMPLE, **change})
    no_total = {k: v for k, v in DOCUMENTED_EXAMPLE.items() if k != "score"}
    assert schema_errors(no_total) == []                    # each test has a score
    assert schema_errors({**no_total, "tests": [{"name": "t", "max_score": 1}]})   # then none has


def test_results_holding_text_that_is_not_unicode_are_refused_before_they_are_written():
    """JSON text is Unicode: a lone surrogate (a name's non-UTF-8 byte as Python reads it)
    is written as an escape a strict reader refuses, so run_autograder's check refuses it
    first, where it can still write a well-formed result instead."""
    from grader.instructor.gradescope.results import problems
    assert problems(DOCUMENTED_EXAMPLE) == []
    bad = {**DOCUMENTED_EXAMPLE, "extra_data": {"notes": ["graded caf\udce9.py"]}}
    assert [p for p in problems(bad) if p.startswith("extra_data/notes/0:") and "not Unicode" in p], problems(bad)


# ---- the zip ------------------------------------------------------------------------------------------
def test_the_zip_has_gradescopes_layout_and_pins_what_it_installs(lesson1_zip, secret_file, tmp_path):
    with zipfile.ZipFile(lesson1_zip) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
        read = z.read
        assert {"setup.sh", "run_autograder", "requirements.txt", "autograder.json", "secret"} <= names
        assert all("/" not in n for n in ("setup.sh", "run_autograder"))     # at the zip's root
        assert modes["setup.sh"] & 0o100 and modes["run_autograder"] & 0o100
        assert read("secret") == secret_file.read_bytes().strip()
        config = json.loads(read("autograder.json"))
        assert config["lesson"] == "lesson1" and config["student_key"] == "email"
        for folder in ("grader/instructor/families", "reference/solutions", "rubrics", "assignments/lesson1"):
            assert any(n.startswith(f"course/{folder}/") for n in names), folder
        assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
        pins = read("requirements.txt").decode().split()
        setup = read("setup.sh").decode()
    # Every dependency pinned to the version these tests run with, the closure complete.
    assert pins and all(p.count("==") == 1 for p in pins)
    for pin in pins:
        name, version = pin.split("==")
        assert metadata.version(name) == version, pin
    pinned = {p.split("==")[0] for p in pins}
    assert {"numpy", "pyyaml", "jsonschema", "referencing", "sqlalchemy"} <= pinned
    assert "-r" in setup and "requirements.txt" in setup and "bubblewrap" in setup
    assert "--self-test" in setup
    for script in ("setup.sh", "run_autograder"):
        assert subprocess.run(["bash", "-n", str(ROOT / "grader" / "instructor" / "gradescope" / script)]).returncode == 0
    # The zip is a secret: only its owner may read it; the same inputs give the same bytes.
    assert stat.S_IMODE(lesson1_zip.stat().st_mode) == 0o600
    again = build("lesson1", secret_file, tmp_path / "again.zip")
    assert again.read_bytes() == lesson1_zip.read_bytes()


def test_building_refuses_bad_input_in_one_line(tmp_path, secret_file):
    empty = tmp_path / "empty.secret"
    empty.write_text("\n")
    zip_path = str(tmp_path / "x.zip")
    for args, says in [(("lesson9", "--secret-file", str(secret_file), "--out", zip_path), "no such lesson"),
                       (("lesson1", "--secret-file", str(empty), "--out", zip_path), "empty"),
                       (("lesson1", "--secret-file", str(secret_file), "--out", str(tmp_path)), "is a folder"),
                       (("lesson1", "--secret-file", str(secret_file), "--out", str(empty / "x.zip")),
                        f"{empty} is a file, not a folder")]:
        code, out, err = run_grader("gradescope", *args)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.zip").exists()


@pytest.mark.parametrize("missing, says", [
    ("assignments/lesson1/exercise.py", "the lesson's stub is missing from the course"),
    ("assignments/lesson1/public.yaml", "no such file"),
])
def test_a_course_missing_what_grading_needs_builds_no_zip(course, secret_file, tmp_path, missing, says):
    """Found here, in one line naming the file, not in Gradescope's image build after the
    upload (nor in each student's result)."""
    (course / missing).unlink()
    out = tmp_path / "lesson1-autograder.zip"
    code, printed, err = run_grader("--course", str(course), "gradescope", "lesson1", "--secret-file",
                                    str(secret_file), "--out", str(out))
    assert code == 2 and printed == "", err
    assert err.startswith(f"grader: {course / missing}: {says}") and err.count("\n") == 1, err
    assert not out.exists()


def test_an_instructors_output_in_the_courses_folders_builds_no_zip(course, secret_file, tmp_path):
    """A gradebook, an export or an earlier zip saved in assignments/ (as `grader gradescope
    lesson1 --out assignments/lesson1/autograder.zip` saves one) went into the zip, and so
    every student's grades and hidden-case feedback to Gradescope and into each grading
    container, each zip holding the one before. Told by their bytes, as the release tells
    them: refused in one line naming each, and no zip is written."""
    lesson = course / "assignments" / "lesson1"
    (lesson / "marks.txt").write_bytes('\ufeff"student","lesson1 total"\r\n'.encode())
    (lesson / "old.sqlite").write_bytes(b"SQLite format 3\x00" + bytes(100))
    (course / "rubrics" / "grades").symlink_to(lesson / "old.sqlite")   # a link is read as what it names
    (lesson / "key.yaml").write_text("# The reference diagnosis of incident p1.\ncauses: []\n")
    out = tmp_path / "lesson1-autograder.zip"
    code, printed, err = run_grader("--course", str(course), "gradescope", "lesson1", "--secret-file",
                                    str(secret_file), "--out", str(out))
    assert code == 2 and printed == "", err
    assert err == (f"grader: {course}: the course's folders hold what an instructor's command wrote, "
                   "which would go into the zip and to Gradescope: assignments/lesson1/key.yaml: an "
                   "incident's answer key; assignments/lesson1/marks.txt: CSV "
                   "export; assignments/lesson1/old.sqlite: gradebook or other SQLite database; "
                   "rubrics/grades: gradebook or other SQLite database; move them out of the course's "
                   "folders\n"), err
    assert not out.exists()


def test_out_replaces_an_earlier_autograder_zip_and_nothing_else(lesson1_zip, tmp_path, secret_file):
    """`--out` naming the secret (or the gradebook) would replace it with a zip, and neither
    can be made again: refused, every byte kept. An earlier zip is built over."""
    secret = tmp_path / "course.secret"
    secret.write_bytes(secret_file.read_bytes())
    not_ours = tmp_path / "other.zip"          # a zip, but not an autograder
    with zipfile.ZipFile(not_ours, "w") as z:
        z.writestr("notes.txt", "mine")
    for victim in (secret, not_ours):
        before = victim.read_bytes()
        code, out, err = run_grader("gradescope", "lesson1", "--secret-file", str(secret), "--out", str(victim))
        assert code == 2 and out == "" and err == (
            f"grader: {victim}: exists and is not an earlier autograder zip, so it is left as it was: "
            "give another --out, or remove the file first\n"), err
        assert victim.read_bytes() == before
    earlier = tmp_path / "lesson1-autograder.zip"
    earlier.write_bytes(lesson1_zip.read_bytes())
    earlier.chmod(0o600)
    assert build("lesson1", secret_file, earlier).read_bytes() == lesson1_zip.read_bytes()


def test_a_build_the_disk_cannot_hold_keeps_the_earlier_zip_and_leaves_no_part_of_one(lesson1_zip, tmp_path,
                                                                                       secret_file):
    """A part-written zip would hold the secret's bytes, readable where the zip is not yet
    private, and the earlier zip would be gone: neither happens."""
    out = tmp_path / "zips"
    out.mkdir()
    earlier = out / "lesson1-autograder.zip"
    earlier.write_bytes(lesson1_zip.read_bytes())
    earlier.chmod(0o600)
    code, printed, err = run_grader("gradescope", "lesson1", "--secret-file", str(secret_file),
                                    "--out", str(earlier), full_disk_at=lesson1_zip.stat().st_size // 2)
    assert code == 2 and printed == "", err
    assert err.startswith(f"grader: {earlier}: cannot write the autograder zip: ") and err.count("\n") == 1, err
    assert earlier.read_bytes() == lesson1_zip.read_bytes()
    assert [p.name for p in out.iterdir()] == [earlier.name]


# ---- grading, as Gradescope runs it -----------------------------------------------------------------
CRASH_AT_IMPORT = b"import ctypes\nctypes.string_at(0)   # SIGSEGV while the file loads\n"


@pytest.mark.parametrize("kind", ["reference", "stub", "wrong", "crash", "loop"])
def test_run_autograder_grades_public_and_hidden_cases(lesson1_zip, tmp_path, kind):
    source = {"reference": REFERENCE.read_bytes(), "stub": STUB.read_bytes(), "crash": CRASH_AT_IMPORT,
              "loop": (SUBMISSIONS / "lesson1" / "loops.py").read_bytes(),
              # Pages rounded down: partial credit, fractions of a criterion's points.
              "wrong": REFERENCE.read_bytes().replace(b"return -(-tokens // page_tokens)",
                                                      b"return tokens // page_tokens")}[kind]
    p, results = graded(lesson1_zip, tmp_path, {f"{kind}_attempt.py": source})
    assert p.returncode == 0, p.stdout + p.stderr
    tests = by_id(results)
    # The same grade as `grader grade` with the same secret, criterion by criterion.
    local = tmp_path / f"{kind}_attempt.py"
    local.write_bytes(source)
    report = grade("lesson1", local, "grade", SECRET)
    assert list(tests) == [c.id for c in report.criteria]
    for c in report.criteria:
        t = tests[c.id]
        # Shown at once: the feedback measured on public cases alone (no hidden input in it).
        assert (t["score"], t["max_score"], t["status"], t["output"], t["visibility"]) == \
            (c.score, c.max_score, "passed" if c.passed else "failed", c.public_feedback, "visible")
        assert not any(case["digest"] in t["output"] for case in report.cases if case["visibility"] == "hidden")
    # The total is the criteria's scores added up (to the float; each is rounded to 4 places).
    assert results["score"] == report.score == pytest.approx(sum(t["score"] for t in results["tests"]),
                                                             rel=0, abs=1e-9)
    hidden = sum(1 for c in report.cases if c["visibility"] == "hidden")
    assert hidden > 0 and f"{hidden} hidden" in results["output"]
    assert results["extra_data"]["submission_digest"] == report.submission_digest
    assert results["extra_data"]["isolation"] == report.isolation
    assert f"Isolation: {report.isolation}" in results["output"]
    assert f"Graded: {kind}_attempt.py (sha256 {report.submission_digest[:16]})" in results["output"]
    full = sum(t["max_score"] for t in results["tests"])
    if kind == "reference":
        assert results["score"] == full == 10
    elif kind == "stub":
        assert results["score"] == 0 and all("not implemented" in t["output"] for t in results["tests"])
    elif kind == "wrong":
        assert tests["pages-for"]["score"] == 0 and "pages_for(1, 16): returned 0, expected 1" in \
            tests["pages-for"]["output"]
        assert any(0 < t["score"] < t["max_score"] for t in results["tests"]), results["tests"]
    elif kind == "crash":
        assert results["score"] == 0 and all("did not load" in t["output"] and "SIGSEGV" in t["output"]
                                             for t in results["tests"])
    else:
        assert tests["pages-for"]["score"] == 0 and "did not return in time" in tests["pages-for"]["output"]
        assert tests["kv-bytes"]["status"] == "passed"


def test_whatever_the_file_is_called_the_one_that_defines_the_functions_is_graded(lesson1_zip, tmp_path):
    notebook = {"cells": [{"cell_type": "markdown", "source": ["# my work"]},
                          {"cell_type": "code", "source": REFERENCE.read_text().splitlines(True)}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p, results = graded(lesson1_zip, tmp_path, {
        "hw/My Lesson 1 (final).ipynb": json.dumps(notebook).encode(),
        "hw/helpers.py": b"def tidy(x):\n    return x\n",
        "README.txt": b"hello"})
    assert p.returncode == 0 and results["score"] == 10
    assert "Graded: hw/My Lesson 1 (final).ipynb" in results["output"]
    assert "not graded: hw/helpers.py" in results["output"]


def test_an_upper_case_suffix_is_graded_as_a_class_folder_grades_it(lesson1_zip, tmp_path):
    """The upload is chosen and read by the one rule (grader/engine/code_file.py): a .PY was
    picked, then refused by the loader as no .py file."""
    p, results = graded(lesson1_zip, tmp_path, {"My Work.PY": REFERENCE.read_bytes(),
                                                "draft.py": b"def pages_for(t, p):\n    return 0\n"})
    assert p.returncode == 0 and results["score"] == 10, results["output"]
    assert "Graded: My Work.PY" in results["output"]
    assert "not graded: draft.py" in results["output"]


def storable(results: dict) -> bool:
    """Every string is Unicode a database stores: no lone surrogate, which Python reads a
    name's non-UTF-8 byte as and json.dumps writes as an escape ("\\udce9") that a strict
    reader (PostgreSQL's jsonb among them) refuses."""
    try:
        json.dumps(results, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


LESSON1_FUNCTIONS = ("kv_bytes_per_token", "pages_for", "pool_pages", "worst_case_pages", "check_contract")


@pytest.mark.parametrize("marker, packages", [
    ("env/pyvenv.cfg", "env/src/somepackage"),          # a virtual environment (pip -e checkouts)
    ("env/conda-meta/history", "env/pkgs/somepackage"),  # a conda environment
    ("", "deps/site-packages"),                          # packages installed into a folder
])
def test_a_repository_upload_is_looked_through_past_its_installed_packages(tmp_path, monkeypatch, marker,
                                                                           packages):
    """A repository committed with its virtual environment (env/, sorted before src/) held
    more files than the listing looks at before it stops: the student's src/hw1.py was
    never seen, and the result said no file defines the lesson's functions."""
    monkeypatch.setattr(upload, "MAX_LISTED", 20)
    if marker:
        (tmp_path / marker).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / marker).write_text("")
    (tmp_path / packages).mkdir(parents=True)
    for n in range(25):
        (tmp_path / packages / f"module{n:02}.py").write_text("x = 1\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hw1.py").write_bytes(REFERENCE.read_bytes())
    picked = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
    assert isinstance(picked, upload.Picked) and picked.shown == "src/hw1.py", picked


def _written(*functions: str) -> str:
    return "".join(f"def {f}(*a):\n    return 0\n" for f in functions)


def _edition(upload_folder: Path, files: dict[str, str]) -> None:
    """A learner edition uploaded whole (a repository of it): rubrics/ beside assignments/,
    and ``files`` (paths inside it) as the learner and the course left them."""
    (upload_folder / "rubrics").mkdir(parents=True)
    (upload_folder / "rubrics" / "lesson1.yaml").write_text("lesson: lesson1\n")
    for name, text in files.items():
        (upload_folder / name).parent.mkdir(parents=True, exist_ok=True)
        (upload_folder / name).write_text(text)


@pytest.mark.parametrize("at", ["", "my-course/"])
def test_an_edition_uploaded_whole_is_graded_on_the_lessons_own_exercise(tmp_path, at):
    """The course's own code in the edition (grader/, reference/, and their copies under build/
    that pip leaves) defines some of a lesson's functions by name: a half-written exercise
    lost to grader/lessons/lesson1.py, graded 0 in its place. Inside a copy of the course only
    the lesson's own folder is the learner's; beside its folders, what they keep stays theirs."""
    exercise = STUB.read_text().replace("raise NotImplementedError(\"pages_for", "return 1  # (\"pages_for", 1)
    _edition(tmp_path / at, {
        "assignments/lesson1/exercise.py": exercise,
        "grader/lessons/lesson1.py": _written("pool_pages", "pages_for"),
        "build/lib/reference/sizing.py": _written("pool_pages", "pages_for", "kv_bytes_per_token"),
        "assignments/lesson2/exercise.py": _written("pool_pages", "pages_for"),
    })
    picked = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
    assert isinstance(picked, upload.Picked) and picked.shown == f"{at}assignments/lesson1/exercise.py", picked
    assert picked.notes == ()              # the course's files are not the learner's to be told of
    (tmp_path / at / "mine").mkdir()
    (tmp_path / at / "mine" / "lesson1_v2.py").write_text(_written(*LESSON1_FUNCTIONS))
    picked = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
    assert isinstance(picked, upload.Picked) and picked.shown == f"{at}mine/lesson1_v2.py", picked


def test_an_edition_uploaded_whole_is_graded_on_lesson6s_submission_folder(tmp_path):
    """Lesson 6 read both files by what they hold: the edition's template sheet and its
    practice incidents' sheets have the sheet's sections too, and one of them was graded as
    the learner's design_sheet.yaml. Its submission/ folder is what `grader check lesson6` reads."""
    _edition(tmp_path, {
        "assignments/design_sheet.yaml": (ROOT / "assignments" / "design_sheet.yaml").read_text(),
        "assignments/lesson6/practice/p1/sheets/R42.yaml":
            (ROOT / "assignments" / "lesson6" / "practice" / "p1" / "sheets" / "R42.yaml").read_text(),
        "assignments/lesson6/submission/diagnosis.yaml": "causes: []\n",
        "assignments/lesson6/submission/design_sheet.yaml": "release: R43\n",
    })
    picked = upload.pick_folder(tmp_path, "lesson6", ("diagnosis.yaml", "design_sheet.yaml"), tmp_path / "into")
    assert isinstance(picked, upload.Picked), picked
    assert picked.shown == ("assignments/lesson6/submission/diagnosis.yaml, "
                            "assignments/lesson6/submission/design_sheet.yaml")
    assert (tmp_path / "into" / "design_sheet.yaml").read_text() == "release: R43\n"


def test_an_environment_made_in_the_folder_of_the_exercise_leaves_the_exercise_listed(tmp_path):
    """`python -m venv .` run in the exercise's own folder puts pyvenv.cfg beside the code:
    the whole folder was passed over as an installed environment, and the student got 'no
    .py or .ipynb file'. What the environment installs is below it; its own files are not."""
    hw = tmp_path / "hw"
    (hw / "lib" / "python3.11" / "site-packages" / "somepackage").mkdir(parents=True)
    (hw / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (hw / "hw1.py").write_bytes(REFERENCE.read_bytes())
    (hw / "src" / "somepackage").mkdir(parents=True)               # a pip -e checkout
    (hw / "src" / "somepackage" / "helpers.py").write_text("def check_contract(): pass\n")
    picked = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
    assert isinstance(picked, upload.Picked) and picked.shown == "hw/hw1.py", picked
    assert upload.uploaded(tmp_path) == [Path("hw/hw1.py"), Path("hw/pyvenv.cfg")]


def test_a_deeply_nested_upload_is_listed_not_the_autograders_failure(tmp_path):
    """Folders nested past Python's recursion limit (a repository can hold them) made the
    listing raise RecursionError: the autograder failed on the student's upload instead of
    grading the file beside them."""
    (tmp_path / "hw1.py").write_bytes(REFERENCE.read_bytes())
    levels = [str(tmp_path)]
    for _ in range(sys.getrecursionlimit() + 200):      # one by one: makedirs recurses too
        levels.append(os.path.join(levels[-1], "a"))
        os.mkdir(levels[-1])
    notes = Path(levels[-1]) / "notes.txt"
    notes.write_text("deep")
    try:
        picked = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
        assert isinstance(picked, upload.Picked) and picked.shown == "hw1.py", picked
        assert upload.uploaded(tmp_path) == [Path("hw1.py"), notes.relative_to(tmp_path)]
    finally:                                            # so does the removal of tmp_path
        notes.unlink()
        for level in reversed(levels[1:]):
            os.rmdir(level)


def test_a_huge_lesson6_file_is_copied_no_further_than_it_is_read(tmp_path):
    """The picked files are copied under their expected names before they are read, and the
    reader stops past MAX_BYTES: a file of gigabytes was copied whole into the container's
    temporary folder first, where a full disk failed the autograder."""
    from grader.engine.submission import MAX_BYTES
    upload_folder = tmp_path / "upload"
    upload_folder.mkdir()
    with open(upload_folder / "diagnosis.yaml", "wb") as f:
        f.truncate(64 * MAX_BYTES)                        # sparse: the upload costs no disk
    (upload_folder / "design_sheet.yaml").write_text("release: R43\n")
    picked = upload.pick_folder(upload_folder, "lesson6", ("diagnosis.yaml", "design_sheet.yaml"),
                                tmp_path / "into")
    assert isinstance(picked, upload.Picked)
    assert (tmp_path / "into" / "diagnosis.yaml").stat().st_size == MAX_BYTES + 1
    assert (tmp_path / "into" / "design_sheet.yaml").read_text() == "release: R43\n"


def test_an_upload_listed_only_in_part_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(upload, "MAX_LISTED", 20)
    for n in range(25):
        (tmp_path / f"a{n:02}.txt").write_text("notes")
    (tmp_path / "z.py").write_bytes(REFERENCE.read_bytes())
    missing = upload.pick_code(tmp_path, "lesson1", LESSON1_FUNCTIONS)
    assert isinstance(missing, upload.Missing)
    assert "only its first 20 files were looked at" in missing.why, missing.why


@pytest.mark.parametrize("files, shown", [
    ({"caf\udce9.py": REFERENCE.read_bytes()}, "Graded: caf\\xe9.py"),        # graded, named by its bytes
    ({"caf\udce9.py.txt": REFERENCE.read_bytes()}, "your upload holds caf\\xe9.py.txt"),
])
def test_an_upload_named_in_another_encoding_is_named_by_its_bytes(lesson1_zip, tmp_path, files, shown):
    """A file from an archive made with another encoding (café.py as the bytes caf\\xe9.py) is
    graded, and named as a class folder names it: its byte as \\xNN, never a lone surrogate
    that results.json would carry into Gradescope's storage."""
    p, results = graded(lesson1_zip, tmp_path, files)
    assert p.returncode == 0 and shown in results["output"], p.stdout
    assert storable(results), results.get("extra_data")
    assert results["score"] == (10 if shown.startswith("Graded") else 0)


@pytest.mark.parametrize("files, says", [
    ({"README.txt": b"I forgot", "notes.pdf": b"%PDF"}, "no .py or .ipynb file to grade"),
    ({}, "your upload is empty"),
    ({"a.py": b"x = 1\n", "b.py": b"y = 2\n"}, "cannot tell which file to grade: several submission "
                                                "files (a.py, b.py), and none defines any"),
    ({"solution.py": b""}, "the submission is empty"),
])
def test_a_missing_or_unusable_file_is_a_clear_zero_on_every_criterion(lesson1_zip, tmp_path, files, says):
    p, results = graded(lesson1_zip, tmp_path, files)
    assert p.returncode == 0, p.stdout
    assert results["score"] == 0 and says in results["output"]
    assert [t["name"].split(":")[0] for t in results["tests"]] == \
        ["kv-bytes", "pool-pages", "pages-for", "worst-case", "contract-ok", "contract-reason"]
    assert all(t["score"] == 0 and t["output"].startswith("not graded:") and says in t["output"]
               for t in results["tests"])
    assert sum(t["max_score"] for t in results["tests"]) == 10


def test_an_upload_of_symbolic_links_says_so_rather_than_that_it_is_empty(lesson1_zip, tmp_path):
    """A repository upload whose exercise is a symbolic link (to a file outside it, or to
    one in a folder the listing passes over) is not read, as no link is: the student read
    "your upload is empty" and could not tell why."""
    root = unpack(lesson1_zip, tmp_path / "autograder")
    submit(root, {".hidden/work.py": b"x = 1\n"})
    (root / "submission" / "exercise.py").symlink_to(".hidden/work.py")
    p, results = run_autograder(root)
    assert p.returncode == 0 and results["score"] == 0, p.stdout
    says = ("your upload holds no file itself; symbolic links are not followed (exercise.py): "
            "upload the files themselves")
    assert says in results["output"] and "your upload is empty" not in results["output"], results["output"]


def test_hidden_only_criteria_are_shown_after_grades_are_published(lesson1_zip, tmp_path):
    root = unpack(lesson1_zip, tmp_path / "autograder")
    rubric = root / "source" / "course" / "rubrics" / "lesson1.yaml"
    text = rubric.read_text()
    start = text.index("id: pages-for")
    at = text.index("visibility: both", start)
    rubric.write_text(text[:at] + "visibility: hidden" + text[at + len("visibility: both"):])
    submit(root, {"attempt.py": (SUBMISSIONS / "lesson1" / "loops.py").read_bytes()})
    p, results = run_autograder(root)
    assert not schema_errors(results) and p.returncode == 0, p.stdout
    visibility = {cid: t["visibility"] for cid, t in by_id(results).items()}
    assert visibility.pop("pages-for") == "after_published"
    assert set(visibility.values()) == {"visible"}
    # Graded on the hidden cases only: of the cases `grade` counts, those `check` does not.
    out = by_id(results)["pages-for"]["output"]
    loops = SUBMISSIONS / "lesson1" / "loops.py"
    counted = {mode: next(c.feedback for c in grade("lesson1", loops, mode, SECRET).criteria
                          if c.id == "pages-for") for mode in ("grade", "check")}
    total, public = (int(re.match(r"(\d+) of \1 ", counted[m]).group(1)) for m in ("grade", "check"))
    assert "did not return in time" in out and out.startswith(f"{total - public} of {total - public} "), out
    # After publication the full feedback is shown; a visible test shows its public part only.
    assert by_id(results)["worst-case"]["output"].endswith("(public cases; the hidden cases' feedback is "
                                                            "published later)")


def test_only_public_feedback_is_shown_at_once():
    # A report whose "both" criterion carries no public feedback (made before it existed):
    # its full feedback names a hidden case, so it waits for publishing.
    from grader.engine.report import CriterionResult, Report
    from grader.instructor.gradescope.results import from_report
    told = "1 of 9 wrong; first, hidden case 3f2a: returned 7"
    crit = [CriterionResult("a", "A", 0.0, 2.0, False, told, "both"),
            CriterionResult("b", "B", 0.0, 2.0, False, told, "both", public_feedback="0 of 4 wrong (public cases)"),
            CriterionResult("c", "C", 2.0, 2.0, True, "", "public")]
    report = Report("lesson1", "T", "grade", "x.py", "0" * 64, 1, tuple(crit), (), "bwrap", "0", 0.1)
    tests = {t["name"][0]: t for t in from_report(report, graded="x.py", build={"course_digest": "d" * 64})["tests"]}
    assert (tests["a"]["visibility"], tests["a"]["output"]) == ("after_published", told)
    assert (tests["b"]["visibility"], tests["b"]["output"]) == ("visible", "0 of 4 wrong (public cases)")
    assert (tests["c"]["visibility"], tests["c"]["output"]) == ("visible", "")


def test_the_grader_that_runs_is_the_zips_own_copy(lesson1_zip, tmp_path):
    root = unpack(lesson1_zip, tmp_path / "autograder")
    init = root / "source" / "course" / "grader" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9+zip-'))
    submit(root, {"attempt.py": REFERENCE.read_bytes()})
    p, results = run_autograder(root)
    assert results["extra_data"]["grader_version"].startswith("9.9.9+zip-"), p.stdout


def attack(root: Path) -> bytes:
    """A submission that tries to forge results.json and to read the secret, the results and
    the metadata, and to tell in its feedback whatever it read."""
    forged = json.dumps({"score": 1000.0, "output": "forged"})
    return (f"import pathlib\n"
            f"ROOT = pathlib.Path({str(root)!r})\n"
            f"def steal():\n"
            f"    for name in ('source/secret', 'results/results.json', 'submission_metadata.json'):\n"
            f"        try:\n"
            f"            return (ROOT / name).read_text()\n"
            f"        except OSError:\n"
            f"            pass\n"
            f"    return 'nothing'\n"
            f"try:\n"
            f"    (ROOT / 'results' / 'results.json').write_text({forged!r})\n"
            f"except OSError:\n"
            f"    pass\n"
            f"def kv_bytes_per_token(model):\n"
            f"    raise RuntimeError('stolen: ' + steal())\n"
            f"pages_for = pool_pages = worst_case_pages = check_contract = kv_bytes_per_token\n").encode()


@pytest.mark.parametrize("mode", ["bwrap", "process"])
def test_a_submission_cannot_read_the_secret_or_forge_results(lesson1_zip, tmp_path, mode):
    root = unpack(lesson1_zip, tmp_path / "autograder")
    submit(root, {"attack.py": attack(root)})
    p, results = run_autograder(root, env={"GRADER_SANDBOX": mode})
    assert not schema_errors(results) and p.returncode == 0, p.stdout
    assert results["score"] == 0 and "forged" not in json.dumps(results)
    assert SECRET.decode() not in json.dumps(results)
    assert "stolen: nothing" in by_id(results)["kv-bytes"]["output"]
    assert results["extra_data"]["isolation"].startswith(mode)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700        # root's alone, whatever the sandbox


def test_an_image_that_cannot_confine_a_submission_grades_none(lesson1_zip, tmp_path):
    # An image without bubblewrap or Landlock: the zip's child.py made to find no Landlock,
    # as on such a kernel, and bubblewrap not used. No learner code may run there.
    root = unpack(lesson1_zip, tmp_path / "autograder")
    child = root / "source" / "course" / "grader" / "engine" / "sandbox" / "child.py"
    child.write_text(without_landlock(child.read_text()))
    witness = tmp_path / "learner-code-ran"
    submit(root, {"attack.py": f"open({str(witness)!r}, 'w').close()\n".encode() + attack(root)})
    p, results = run_autograder(root, env={"GRADER_SANDBOX": "process"})
    assert p.returncode == 1 and not schema_errors(results), p.stdout
    assert "cannot confine a submission" in results["output"] and "not a grade" in results["output"]
    assert "tests" not in results and not witness.exists()
    # What to do is Gradescope's: the command line's flag to grade at that risk exists nowhere here.
    assert "lacks Landlock" in results["output"] and "grader grade" in results["output"]
    assert "--dangerously" not in results["output"] + p.stdout
    p, _ = run_autograder(root, "--self-test", env={"GRADER_SANDBOX": "process"})
    assert p.returncode == 1 and "self-test: FAILED" in p.stdout and "cannot confine" in p.stdout


def test_the_self_test_setup_runs_passes_on_the_reference_and_fails_on_a_broken_image(lesson1_zip, tmp_path):
    root = unpack(lesson1_zip, tmp_path / "autograder")
    p, _ = run_autograder(root, "--self-test")
    assert p.returncode == 0 and "self-test: the reference scores 10 / 10: ok" in p.stdout, p.stdout + p.stderr
    # An image whose sandbox child cannot start cannot grade: its build fails.
    (root / "source" / "course" / "grader" / "engine" / "sandbox" / "child.py").write_text("raise SystemExit(3)\n")
    p, _ = run_autograder(root, "--self-test")
    assert p.returncode == 1 and "FAILED" in p.stdout, p.stdout + p.stderr


def test_lesson6s_self_test_passes_on_the_reference_answer(lesson6_zip, tmp_path):
    """Lesson 6's self-test wrote the reference answer into the very folder its grade copied
    the picked files to: copying a file onto itself failed, so every lesson 6 image failed
    its build on Gradescope."""
    root = unpack(lesson6_zip, tmp_path / "autograder")
    p, _ = run_autograder(root, "--self-test")
    assert p.returncode == 0 and "self-test: the reference scores 10 / 10: ok" in p.stdout, p.stdout + p.stderr


def test_when_the_autograder_itself_cannot_grade_it_says_so_without_a_grade(lesson1_zip, tmp_path):
    root = unpack(lesson1_zip, tmp_path / "autograder")
    (root / "source" / "secret").write_text("  \n")
    submit(root, {"attempt.py": REFERENCE.read_bytes()})
    p, results = run_autograder(root)
    assert p.returncode == 1 and not schema_errors(results)
    assert "could not grade" in results["output"] and "not a grade" in results["output"]
    assert "secret file is empty" in p.stdout
    # Python never starting still leaves a well-formed results.json.
    (root / "results" / "results.json").unlink()
    p, results = run_autograder(root, env={"GRADER_PYTHON": str(tmp_path / "no-such-python")})
    assert p.returncode != 0 and not schema_errors(results) and "stopped before" in results["output"]


# ---- lesson 6: each student's own incident -------------------------------------------------------------
def answer_of(student: str, tmp_path: Path) -> dict[str, bytes]:
    folder = write_answer(student_incident(COURSE, incidents_key(SECRET), student), tmp_path / student)
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_lesson6_grades_the_submitters_own_incident(lesson6_zip, tmp_path):
    alice = answer_of("alice@example.edu", tmp_path)
    renamed = {"work/My Diagnosis.yml": alice["diagnosis.yaml"], "work/sheet-v2.yaml": alice["design_sheet.yaml"]}
    p, results = graded(lesson6_zip, tmp_path / "a", renamed)
    assert p.returncode == 0 and results["score"] == sum(t["max_score"] for t in results["tests"]) == 10, \
        p.stdout
    assert "graded work/My Diagnosis.yml as diagnosis.yaml" in results["output"]
    # Judged on the student's own incident: no feedback before publication, the full one then.
    assert {t["visibility"] for t in results["tests"]} == {"after_published"}
    assert all("published later" not in t["output"] for t in results["tests"])
    # Alice's answer handed in by Bob is graded on Bob's incident: it does not fit.
    p, bob = graded(lesson6_zip, tmp_path / "b", alice, users=({"email": "bob@example.edu", "id": 2},))
    assert p.returncode == 0 and bob["score"] < results["score"]
    expected = grade("lesson6", write_answer(student_incident(COURSE, incidents_key(SECRET), "alice@example.edu"),
                                             tmp_path / "check" / "alice@example.edu"), "grade", SECRET)
    assert results["score"] == expected.score


def test_lesson6_says_at_once_when_the_diagnosis_names_another_incident_than_the_submitters(lesson6_zip, tmp_path):
    """Incidents are handed out under ids the instructor types (grader incident --student);
    Gradescope names the submitter by its own metadata. Where the two differ (a capital
    letter in an email), a right diagnosis is graded against another incident, and every
    criterion saying so waits for publishing: the student saw 3 / 10 and no reason before
    the deadline. The visible output says which incident was drawn for which id."""
    alice = answer_of("alice@example.edu", tmp_path)
    named = student_incident(COURSE, incidents_key(SECRET), "alice@example.edu").id
    drawn = student_incident(COURSE, incidents_key(SECRET), "Alice@Example.edu").id
    assert named != drawn
    p, results = graded(lesson6_zip, tmp_path / "a", alice, users=({"email": "Alice@Example.edu", "id": 1},))
    assert p.returncode == 0 and results["score"] < 10, p.stdout
    note = [line for line in results["output"].splitlines() if named in line]
    assert note and drawn in note[0] and "Alice@Example.edu" in note[0], results["output"]
    # Under the id it was drawn for, nothing is said.
    p, results = graded(lesson6_zip, tmp_path / "b", alice)
    assert results["score"] == 10 and named not in results["output"], results["output"]
    # Nor under that id typed in capitals: the grade reads it as the same incident, and a
    # note that it is another would send the student to their instructor for nothing.
    shouted = dict(alice, **{"diagnosis.yaml": alice["diagnosis.yaml"].replace(
        f"incident: {named}".encode(), f"incident: {named.upper()}".encode())})
    assert shouted != alice
    p, results = graded(lesson6_zip, tmp_path / "c", shouted)
    assert results["score"] == 10 and named.upper() not in results["output"], results["output"]


@pytest.mark.parametrize("name, text, says", [
    ("diagnosis.yaml", b"# caf\xe9\n", "diagnosis.yaml is not usable: not UTF-8 text (byte 5)"),
    ("diagnosis.yaml", b"causes: [\n", "diagnosis.yaml is not usable: line 2, column 1: not valid YAML"),
    ("diagnosis.yaml", b"incident: i0\ncauses: []\nwhy: it broke\n",
     "diagnosis.yaml is not usable: line 3: why: unknown key"),
    ("design_sheet.yaml", b"# my fixes\n", "design_sheet.yaml is empty: start from your bundle's sheets/R42.yaml"),
    # A key escaped as a lone surrogate, which YAML's double quotes allow: shown replaced, and
    # kept out of extra_data, where results.json would carry it as an escape no store takes.
    ("diagnosis.yaml", b'incident: i0\ncauses: []\n"\\udce9": 1\n',
     "diagnosis.yaml is not usable: line 3: \ufffd: unknown key"),
])
def test_lesson6_says_at_once_what_makes_a_file_unusable(lesson6_zip, tmp_path, name, text, says):
    """Every lesson 6 criterion waits for publishing, so a diagnosis that could not even be
    read scored its points with no reason shown before the deadline. Why a file cannot be
    read depends on no incident: the visible output says it, as the criteria do."""
    alice = answer_of("alice@example.edu", tmp_path)
    p, results = graded(lesson6_zip, tmp_path / "a", {**alice, name: text})
    assert p.returncode == 0 and results["score"] < 10, p.stdout
    assert f"Note: {says}" in results["output"], results["output"]
    assert storable(results), results["extra_data"]
    hidden = [t for t in results["tests"] if says in t["output"]]
    assert hidden and {t["visibility"] for t in hidden} == {"after_published"}


def test_lesson6_student_key_names_students_by_another_field(secret_file, tmp_path):
    z = build("lesson6", secret_file, tmp_path / "by-id.zip", "--student-key", "id")
    p, results = graded(z, tmp_path, answer_of("4711", tmp_path),
                        users=({"email": "carol@example.edu", "id": 4711},))
    assert p.returncode == 0 and results["score"] == 10, p.stdout


@pytest.mark.parametrize("case", ["group", "no metadata", "no user", "one file"])
def test_lesson6_without_one_student_or_both_files_is_clear(lesson6_zip, tmp_path, case):
    alice = answer_of("alice@example.edu", tmp_path)
    if case == "group":
        p, results = graded(lesson6_zip, tmp_path, alice, users=({"email": "a@x.edu"}, {"email": "b@x.edu"}))
        assert p.returncode == 0 and results["score"] == 0 and "individual" in results["output"]
        assert "a@x.edu" in results["output"] and len(results["tests"]) == 5
    elif case == "no metadata":
        p, results = graded(lesson6_zip, tmp_path, alice, users=None)
        assert p.returncode == 1 and "could not grade" in results["output"], p.stdout
        assert "submission_metadata.json" in p.stdout
    elif case == "no user":
        # Not a group: it told the student "this submission lists 0 students (); each of you
        # submits alone", a grade of 0 for what is the metadata's fault.
        p, results = graded(lesson6_zip, tmp_path, alice, users=())
        assert p.returncode == 1 and "could not grade" in results["output"], p.stdout
        assert "lists no user" in p.stdout and "individual" not in results["output"]
    else:
        p, results = graded(lesson6_zip, tmp_path, {"answer.yaml": alice["diagnosis.yaml"]})
        assert p.returncode == 0 and 0 <= results["score"] < 10
        assert "there is no design_sheet.yaml" in json.dumps(results)
