"""Grading a class: discovery, per-student errors, determinism across workers, resuming
after kill -9, and a class of every kind of submission that grades, resumes, exports and
matches nbgrader (the class of 200 is a benchmark: bench/class_of_200.py)."""
import json
import os
from pathlib import Path

import pytest

from classroom import (assert_whole, by_student, check_class, covering_size, kill_and_resume,
                       make_class, run_cli, templates)
from conftest import ROOT, SECRET, SUBMISSIONS, grade
from grader.engine.errors import InputError
from grader.instructor.batch import (BatchSummary, Entry, discover, refuse_a_folder_of_no_submissions,
                                     run_batch)
from grader.engine.layout import find_course
from grader.instructor.gradebook import open_gradebook
from mutants import mutations

COURSE = find_course(str(ROOT))
LESSONS = COURSE.lessons()


def stable(report: dict) -> dict:
    """A report minus what may differ between two gradings of the same file."""
    return {k: v for k, v in report.items() if k != "duration_s"}


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "course.secret"
    path.write_bytes(SECRET)
    return path


def standalone_scores(lesson: str, mutants: bool = True) -> dict[str, dict[str, float]]:
    """Each template's criterion scores, graded once on its own (not in a batch)."""
    out = {}
    for name, path in templates(lesson, mutants).items():
        report = grade(lesson, path, "grade", SECRET)
        out[name] = {c.id: c.score for c in report.criteria}
    return out


# ---------------------------------------------------------------------------- discovery

def test_what_the_graders_commands_wrote_into_a_class_folder_is_no_student(tmp_path):
    """`grader feedback --out submitted/` (or a CSV export, a class report, a gradebook kept
    there): the next grade of the class recorded alice.md, grades.csv and index.html as
    students with 0 points ('not a submission'), in every export, and wrote them feedback.
    Told by their bytes, as the release tells them; a note of the instructor's is still a
    student, recorded with why it is not a submission."""
    import zipfile
    from grader.instructor.class_report import write_report
    from grader.instructor.exports.csv import export_csv
    from grader.instructor.exports.feedback import write_feedback
    from test_gradebook import fake_report
    folder = tmp_path / "class"
    folder.mkdir()
    for student in ("alice", "bob"):
        (folder / f"{student}.py").write_text("x = 1\n")
    with open_gradebook(str(tmp_path / "old.db")) as book:
        for student in ("alice", "bob"):
            book.record(student, fake_report())
        write_feedback(book, str(folder))
        write_feedback(book, str(folder), fmt="html")
        export_csv(book, str(folder / "grades.csv"))
        write_report(book, "lesson1", folder / "report")
    (folder / "report" / "index.html").rename(folder / "index.html")
    (folder / "old.db").write_bytes((tmp_path / "old.db").read_bytes())
    with zipfile.ZipFile(folder / "lesson1-autograder.zip", "w") as z:
        for name in ("autograder.json", "run_autograder"):
            z.writestr(name, "")
    (folder / "notes.txt").write_text("alice asked for an extension")
    assert {"alice.md", "bob.html", "grades.csv", "index.html"} <= {p.name for p in folder.iterdir()}
    entries = {e.student: e for e in discover(folder, "lesson1", COURSE)}
    # report/ keeps its two figures alone, which name the report as their maker.
    assert sorted(entries) == ["alice", "bob", "notes.txt"]
    assert entries["notes.txt"].problem.startswith("not a submission")


def test_a_folder_of_what_the_graders_commands_wrote_is_no_student(tmp_path):
    """`grader report --out submitted/report/` and `grader feedback --out submitted/feedback/`
    (or `cd submitted && grader report lesson1`, whose default --out is report/): the next
    grade of the class recorded "report" and "feedback" as students with 0 points ('no
    submission for lesson1'), in every export and report. A folder holding only such
    outputs is passed over; one that holds anything else (a student's folder with a
    feedback page saved in it) is still a student."""
    from grader.instructor.class_report import write_report
    from grader.instructor.exports.csv import export_csv
    from grader.instructor.exports.feedback import write_feedback
    from test_gradebook import fake_report
    folder = tmp_path / "class"
    (folder / "alice" / "lesson1").mkdir(parents=True)
    (folder / "alice" / "lesson1" / "exercise.py").write_text("x = 1\n")
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        book.record("alice", fake_report())
        write_report(book, "lesson1", folder / "report")
        write_feedback(book, str(folder / "feedback"))
        (folder / "exports").mkdir()
        export_csv(book, str(folder / "exports" / "grades.csv"))
        write_feedback(book, str(folder / "alice"))          # saved beside alice's own folder
    (folder / "report" / ".DS_Store").write_text("")        # a hidden name is passed over
    (folder / "notes").mkdir()                              # an empty folder is still someone's
    entries = {e.student: e for e in discover(folder, "lesson1", COURSE)}
    assert sorted(entries) == ["alice", "notes"]
    assert not entries["alice"].problem
    # The same report folder with a file of someone else's in it is a student.
    (folder / "report" / "exercise.txt").write_text("my answers")
    assert "report" in {e.student for e in discover(folder, "lesson1", COURSE)}


def test_discover_nbgrader_layout_and_its_problems(tmp_path):
    sub = tmp_path / "submitted"
    (sub / "alice" / "lesson1").mkdir(parents=True)
    (sub / "alice" / "lesson1" / "exercise.py").write_text("x = 1\n")
    (sub / "alice" / "lesson1" / "timestamp.txt").write_text("2026-01-01")
    (sub / "bob" / "lesson2").mkdir(parents=True)                         # nothing for lesson1
    (sub / "carol" / "lesson1").mkdir(parents=True)
    for name in ("a.py", "b.ipynb"):
        (sub / "carol" / "lesson1" / name).write_text("x = 1\n")
    (sub / "dan" / "lesson1").mkdir(parents=True)
    (sub / "dan" / "lesson1" / "lesson1.ipynb").write_text("{}")
    (sub / "dan" / "lesson1" / "scratch.py").write_text("x = 1\n")
    (sub / "erin" / "lesson1").mkdir(parents=True)                        # the wrong kind of file
    for name in ("answers.txt", "answers.zip", ".DS_Store"):
        (sub / "erin" / "lesson1" / name).write_text("x = 1\n")
    (sub / "fay" / "lesson1").mkdir(parents=True)                         # nothing at all
    (sub / "gus" / "lesson1" / "exercise.py").mkdir(parents=True)         # a folder named as the file
    (tmp_path / "gradebook.db").write_text("")                           # beside submitted/: ignored
    entries = {e.student: e for e in discover(tmp_path, "lesson1")}
    assert set(entries) == {"alice", "bob", "carol", "dan", "erin", "fay", "gus"}
    # What is there instead, for the instructor and the student's feedback.
    assert entries["erin"].problem == ("no .py or .ipynb file in the submission folder (it holds "
                                       "answers.txt, answers.zip)")
    assert entries["fay"].problem == "no .py or .ipynb file in the submission folder (it is empty)"
    assert entries["gus"].problem == ("no .py or .ipynb file in the submission folder (it holds "
                                      "exercise.py/)")
    assert entries["alice"].path.endswith("exercise.py") and not entries["alice"].problem
    assert "no submission for lesson1" in entries["bob"].problem
    assert "several submission files (a.py, b.ipynb)" in entries["carol"].problem
    assert entries["dan"].path.endswith("lesson1.ipynb") and not entries["dan"].problem


def test_a_symbolic_link_out_of_the_class_folder_is_not_followed(tmp_path, secret_file):
    """A student's link to the instructor's secret (or to a solution) would put its text in
    the sandbox and its lines in the feedback: it is that student's error, never read."""
    folder = tmp_path / "class"
    (folder / "submitted" / "mallory" / "lesson1").mkdir(parents=True)
    (folder / "submitted" / "mallory" / "lesson1" / "exercise.py").symlink_to(secret_file)
    elsewhere = tmp_path / "instructor"                 # outside the class folder
    elsewhere.mkdir()
    (elsewhere / "exercise.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "submitted" / "trudy").mkdir()
    (folder / "submitted" / "trudy" / "lesson1").symlink_to(elsewhere, target_is_directory=True)
    (folder / "submitted" / "alice" / "lesson1").mkdir(parents=True)
    (folder / "submitted" / "alice" / "lesson1" / "exercise.py").write_text(
        (ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "submitted" / "bob" / "lesson1").mkdir(parents=True)       # a link of bob's own: fine
    (folder / "submitted" / "bob" / "work.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "submitted" / "bob" / "lesson1" / "exercise.py").symlink_to(Path("..") / "work.py")
    entries = {e.student: e for e in discover(folder, "lesson1")}
    for student in ("mallory", "trudy"):
        assert "leads outside the class folder" in entries[student].problem
    assert not entries["alice"].problem and not entries["bob"].problem
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", url, "--jobs", "1", "--quiet")
    assert p.returncode == 0, p.stderr
    stored = by_student(url)
    assert stored["mallory"].status == "error" and stored["alice"].score == 10
    assert SECRET.decode() not in json.dumps([r.report for r in stored.values()]) + stored["mallory"].error


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_link_into_another_students_folder_is_not_followed(tmp_path, secret_file, link):
    """What a student's folder holds is theirs (an unzipped upload, a clone of their
    repository, where a link is kept): mallory's exercise.py (or lesson1/) as a link to
    ../../alice/lesson1/ was graded as mallory's, with alice's score, her digest (so the two
    look like a copy) and her code quoted in mallory's feedback. It is mallory's error now,
    and alice's result is hers alone."""
    folder = tmp_path / "class"
    alice = folder / "submitted" / "alice" / "lesson1"
    alice.mkdir(parents=True)
    (alice / "exercise.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    mallory = folder / "submitted" / "mallory"
    mallory.mkdir()
    if link == "file":
        (mallory / "lesson1").mkdir()
        (mallory / "lesson1" / "exercise.py").symlink_to(Path("..") / ".." / "alice" / "lesson1" / "exercise.py")
    else:
        (mallory / "lesson1").symlink_to(Path("..") / "alice" / "lesson1", target_is_directory=True)
    entries = {e.student: e for e in discover(folder, "lesson1")}
    assert not entries["alice"].problem
    assert "leads outside the student's own folder" in entries["mallory"].problem
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", url, "--jobs", "1", "--quiet")
    assert p.returncode == 0, p.stderr
    stored = by_student(url)
    assert stored["alice"].score == 10
    assert stored["mallory"].status == "error" and stored["mallory"].score == 0


def test_a_linked_students_folder_is_not_read_and_a_link_loop_stops_no_one(tmp_path):
    """A student's folder that is a link out of the class folder is refused before its files
    are read: choosing among two would parse them, and a tie would name them in that
    student's feedback. A link that leads round in a loop is its student's error, not a
    crash that stops the class."""
    elsewhere = tmp_path / "instructor" / "lesson1"
    elsewhere.mkdir(parents=True)
    solution = (ROOT / "reference/solutions/lesson1.py").read_text()
    for name in ("solution_a.py", "solution_b.py"):          # a tie: both define everything
        (elsewhere / name).write_text(solution)
    root = tmp_path / "class" / "submitted"
    (root / "alice" / "lesson1").mkdir(parents=True)
    (root / "alice" / "lesson1" / "exercise.py").write_text(solution)
    (root / "mallory").symlink_to(elsewhere.parent, target_is_directory=True)
    (root / "trudy").mkdir()
    (root / "trudy" / "lesson1").symlink_to(elsewhere, target_is_directory=True)
    (root / "loop.py").symlink_to("loop.py")
    (root / "round").mkdir()
    (root / "round" / "lesson1").symlink_to(root / "round" / "lesson1")
    entries = {e.student: e for e in discover(tmp_path / "class", "lesson1")}
    assert not entries["alice"].problem
    for student in ("mallory", "trudy"):
        assert entries[student].problem == ("a symbolic link that leads outside the class "
                                            "folder; hand in the file itself")
    for student in ("loop", "round"):
        assert "leads round in a loop" in entries[student].problem, entries[student]
    assert "solution_a" not in repr(entries)


def test_a_gradebook_kept_in_the_class_folder_is_no_student(tmp_path):
    """Kept beside the submissions (a flat folder), the gradebook and the journal files
    SQLite writes beside it were three students with 0 points in every export."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "loop.py").symlink_to("loop.py")          # resolved without a loop error
    with open_gradebook(str(folder / "grades.db")) as book:
        for run in range(2):
            summary = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
            assert (summary.students, summary.graded, summary.skipped) == (2, 1 - run, run)
            assert book.students() == ["alice", "loop"]
            # The second run finds SQLite's files beside the gradebook too.
            assert {"grades.db-wal", "grades.db-shm"} <= {p.name for p in folder.iterdir()}


def test_a_class_of_a_course_missing_the_lessons_stub_is_one_line_naming_it(course, tmp_path, secret_file):
    """The stub tells a student's several files apart: without it a class is refused in one
    line naming it (it was a traceback, exit 1)."""
    (course / "assignments" / "lesson1" / "exercise.py").unlink()
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    p = run_cli("--course", str(course), "grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", str(tmp_path / "gb.db"), "--quiet")
    stub = course / "assignments" / "lesson1" / "exercise.py"
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr == (f"grader: {stub}: the lesson's stub is missing from the course: it names the "
                        "functions by which a student's files are told apart\n")


def test_names_that_are_not_utf8_are_recorded_not_a_crash_of_the_class(tmp_path, secret_file):
    """A zip made on a machine of another encoding unpacks "café.py" as the bytes caf\\xe9.py,
    which Python reads with a lone surrogate that no database stores: the class stopped at
    the first such name with a traceback. A student so named is that student's error, shown
    as \\xNN; a file so named in a student's own folder is graded, and named the same way."""
    solution = (ROOT / "reference/solutions/lesson1.py").read_bytes()
    folder = tmp_path / "class"
    (folder / "alice" / "lesson1").mkdir(parents=True)
    (folder / "alice" / "lesson1" / "exercise.py").write_bytes(solution)
    root = os.fsencode(folder)
    with open(root + b"/caf\xe9.py", "wb") as f:                    # a flat student
        f.write(solution)
    os.makedirs(root + b"/m\xfcller/lesson1")                     # an nbgrader student
    os.makedirs(root + b"/bob/lesson1")
    with open(root + b"/bob/lesson1/r\xe9ponse.py", "wb") as f:    # bob's own file
        f.write(solution)
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file), "--gradebook", url,
                "--jobs", "1", "--quiet", "--json")
    assert p.returncode == 0, p.stderr
    stored = by_student(url)
    assert sorted(stored) == ["alice", "bob", "caf\\xe9", "m\\xfcller"]
    assert stored["bob"].score == 10 and stored["bob"].submission_path == "bob/lesson1/r\\xe9ponse.py"
    assert stored["caf\\xe9"].error == ("its name is not UTF-8 text (caf\\xe9): rename it (the archive it "
                                        "came from used another encoding), then grade again")
    assert stored["m\\xfcller"].status == "error"
    for command in (("export", "--format", "csv"), ("feedback", "--out", str(tmp_path / "fb"))):
        assert run_cli(*command, "--gradebook", url).returncode == 0


def test_discover_flat_folder(tmp_path):
    for name in ("alice.py", "bob.ipynb", "carol.py", "carol.ipynb", "notes.txt", ".hidden.py"):
        (tmp_path / name).write_text("x = 1\n")
    entries = {e.student: e for e in discover(tmp_path, "lesson1")}
    assert set(entries) == {"alice", "bob", "carol", "notes.txt"}
    assert "two submissions" in entries["carol"].problem
    assert "not a submission" in entries["notes.txt"].problem


def test_discovery_records_a_name_that_is_not_utf8_as_its_error_and_goes_on_to_the_next(tmp_path):
    """In process, what the class test above shows through the command line: the student
    is named as \\xNN with why, and the students after it are found as ever."""
    root = os.fsencode(tmp_path)
    for name in (b"a\xe9.py", b"b.py", b"c\xfc"):
        if name.endswith(b".py"):
            with open(root + b"/" + name, "w") as f:
                f.write("x = 1\n")
        else:
            os.makedirs(root + b"/" + name + b"/lesson1")
    entries = {e.student: e for e in discover(tmp_path, "lesson1", COURSE)}
    assert sorted(entries) == ["a\\xe9", "b", "c\\xfc"]
    assert entries["a\\xe9"].problem.startswith("its name is not UTF-8 text (a\\xe9)")
    assert entries["c\\xfc"].problem.startswith("its name is not UTF-8 text (c\\xfc)")
    assert entries["b"].problem == "" and entries["b"].path == str(tmp_path / "b.py")


@pytest.mark.parametrize("layout", ["flat", "nbgrader"])
def test_what_a_macos_zip_leaves_beside_the_students_is_no_student(tmp_path, layout):
    """Finder's zip holds __MACOSX/ (with ._alice.py, the metadata of alice.py) beside the
    class: recorded, "__MACOSX" was a student with 0 points in every export and report."""
    root = tmp_path / "submitted" if layout == "nbgrader" else tmp_path
    alice = root / "alice" / "lesson1" / "exercise.py" if layout == "nbgrader" else root / "alice.py"
    alice.parent.mkdir(parents=True, exist_ok=True)
    alice.write_text("x = 1\n")
    junk = root / "__MACOSX" / alice.parent.relative_to(root)
    junk.mkdir(parents=True)
    (junk / f"._{alice.name}").write_bytes(b"\x00\x05\x16\x07")
    assert [(e.student, e.problem) for e in discover(tmp_path, "lesson1")] == [("alice", "")]


@pytest.mark.parametrize("names, seen", [
    ((), "it is empty"),
    (("README.md", "lesson2/"), "2 entries, none a submission, e.g. README.md"),
], ids=["empty", "the-wrong-folder"])
def test_a_folder_with_no_submission_at_all_is_refused_and_records_nothing(tmp_path, secret_file, names, seen):
    """The wrong folder (an empty one, the course's assignments/) graded as a class of
    nobody, or of README.md and lesson2 as students with 0 points each, exit 0."""
    folder = tmp_path / "class"
    folder.mkdir()
    for name in names:
        (folder / name).mkdir() if name.endswith("/") else (folder / name).write_text("# notes\n")
    db = tmp_path / "gb.db"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", str(db), "--quiet")
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr == (f"grader: {folder}: no submission for lesson1 here ({seen}): a class folder "
                        "holds <student>.py or <student>.ipynb files, or nbgrader's "
                        "submitted/<student>/lesson1/ folders\n")
    # The gradebook it would have made is not left behind, empty, to be taken for a class.
    assert sorted(tmp_path.iterdir()) == [folder]
    p = run_cli("export", "--format", "csv", "--gradebook", str(db))
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr == (f"grader: {db}: no gradebook here: grade into it first (grader grade ... "
                        "--gradebook), or give the gradebook your grades went to\n")


@pytest.mark.parametrize("names, seen", [
    ((), "it is empty"),
    (("notes.txt",), "1 entry, none a submission, e.g. notes.txt"),
    (("README.md", "lesson2/", "zoe/"), "3 entries, none a submission, e.g. README.md"),
], ids=["empty", "one-entry", "three-entries"])
def test_a_folder_of_no_submission_is_refused_in_words_that_count_what_it_holds(tmp_path, names, seen):
    """In this process (the CLI's test above runs a child): the count and its noun, and the
    first entry by name; one attempt at a submission makes it a class."""
    for name in names:
        (tmp_path / name).mkdir() if name.endswith("/") else (tmp_path / name).write_text("# notes\n")
    with pytest.raises(InputError) as refused:
        refuse_a_folder_of_no_submissions(discover(tmp_path, "lesson1"), tmp_path, "lesson1")
    assert refused.value.message == (f"no submission for lesson1 here ({seen}): a class folder holds "
                                     "<student>.py or <student>.ipynb files, or nbgrader's "
                                     "submitted/<student>/lesson1/ folders")
    (tmp_path / "ann.py").write_text("x = 1\n")
    assert refuse_a_folder_of_no_submissions(discover(tmp_path, "lesson1"), tmp_path, "lesson1") is None


def test_discovery_names_the_first_own_file_of_one_students_folder(tmp_path):
    (tmp_path / "lesson1.ipynb").write_text("{}")
    (tmp_path / "exercise.py").write_text("x = 1\n")
    (tmp_path / "alice.py").write_text("x = 1\n")
    with pytest.raises(InputError) as refused:
        discover(tmp_path, "lesson1")
    assert refused.value.message.startswith("holds exercise.py, a submission's own file rather than a <student>.py")


def test_a_folder_lessons_submission_is_the_students_lesson_folder_else_the_students_folder(tmp_path):
    """Lesson 6 is a folder: nbgrader's <student>/lesson6/ when there is one (even beside
    the files themselves), else <student>/ when it holds them; two files of one student are
    one entry, at the first by name, whose problem names both."""
    for at in ("alice", "bob/lesson6", "dave", "dave/lesson6"):
        (tmp_path / at).mkdir(parents=True, exist_ok=True)
        for name in ("diagnosis.yaml", "design_sheet.yaml"):
            (tmp_path / at / name).write_text("x: 1\n")
    (tmp_path / "carol").mkdir()
    entries = {e.student: e for e in discover(tmp_path, "lesson6")}
    assert entries["alice"] == Entry("alice", str(tmp_path / "alice"))
    assert entries["bob"] == Entry("bob", str(tmp_path / "bob" / "lesson6"))
    assert entries["dave"] == Entry("dave", str(tmp_path / "dave" / "lesson6"))
    assert entries["carol"].problem == "no submission for lesson6 (no folder lesson6/)"
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("erin.py", "erin.ipynb"):
        (twice / name).write_text("x = 1\n")
    [entry] = discover(twice, "lesson1")
    assert entry == Entry("erin", str(twice / "erin.ipynb"), "two submissions: erin.ipynb and erin.py; keep one")


def test_one_students_nbgrader_folder_is_refused_as_a_class_and_its_file_is_theirs(tmp_path, secret_file):
    """`grade lesson1 submitted/alice/lesson1` graded a class of one student named
    "exercise", and `.../alice/lesson1/exercise.py` named one by one was recorded as
    "exercise" too: every such student one row, under a name that is nobody's."""
    folder = tmp_path / "submitted" / "alice" / "lesson1"
    folder.mkdir(parents=True)
    (folder / "exercise.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    db = tmp_path / "gb.db"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", str(db), "--quiet")
    assert p.returncode == 2 and p.stderr.startswith(
        f"grader: {folder}: holds exercise.py, a submission's own file rather than a <student>.py: "
        "this is one student's folder;"), p.stderr
    p = run_cli("grade", "lesson1", str(folder / "exercise.py"), "--secret-file", str(secret_file),
                "--gradebook", str(db), "--json")
    assert p.returncode == 0, p.stderr
    with open_gradebook(str(db), create=False) as book:
        assert [(r.student, r.score) for r in book.results()] == [("alice", 10.0)]


def test_bad_files_are_per_student_errors_never_a_stop(tmp_path, secret_file):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "good.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "binary.py").write_bytes(b"\x00\x01\x02")
    (folder / "empty.py").write_text("  \n")
    (folder / "broken.ipynb").write_text("{not json")
    (folder / "syntax.py").write_text("def (:\n")
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file),
                "--gradebook", url, "--jobs", "2", "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["graded"] == 2                 # good, and syntax (graded: 0 points)
    failed = {f["student"]: f["error"] for f in summary["failed"]}
    assert set(failed) == {"binary", "empty", "broken"}
    assert "binary file" in failed["binary"] and "empty" in failed["empty"]
    stored = by_student(url)
    assert stored["good"].score == stored["good"].max_score
    assert stored["syntax"].status == "graded" and stored["syntax"].score == 0
    assert stored["binary"].status == "error"
    # The progress bar went to stderr: count, rate and time left.
    assert "grading lesson1 [" in p.stderr and "/min" in p.stderr and "left" in p.stderr


def _answer_or_hang(*args):
    """A pool task standing in for grade_one: "fast" is graded at once, anything else
    never ends (a looping submission with a budget of hours)."""
    import time
    if args[-1] != "fast":
        time.sleep(3600)
    return {"graded": args[-1]}


def _children() -> set[int]:
    from pathlib import Path
    me = str(os.getpid())
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":          # (state, ppid, ...); a zombie is gone
            kids.add(int(stat.parent.name))
    return kids


def test_a_class_stopped_early_stops_its_workers_where_they_are(monkeypatch):
    """Ctrl-C (or a full gradebook) ends a class's run: the pool's workers are killed
    mid-submission, not left to grade the one in hand and the one queued behind it to the
    end (a looping submission's whole time budget) while the instructor waits for a prompt.
    The bound below only tells a hang (an hour) from a return; it times nothing."""
    import threading
    from grader.instructor import batch
    monkeypatch.setattr(batch, "grade_one", _answer_or_hang)
    before = _children()
    outcomes = batch._local_pool([batch.Job(s, s) for s in ("fast", "slow1", "slow2", "slow3")], 2, ())
    workers = set()
    try:
        job, result = next(outcomes)
        workers = _children() - before
        assert (job.student, result, len(workers)) == ("fast", {"graded": "fast"}, 2)
        closing = threading.Thread(target=outcomes.close, daemon=True)
        closing.start()                     # as run_batch does when an interrupt reaches it
        closing.join(120)
        assert not closing.is_alive(), "the run waited for its workers to finish their submissions"
        assert not workers & _children()
    finally:
        for pid in workers & _children():
            os.kill(pid, 9)


def _answer_once_flagged(flag, name):
    """A pool task standing in for grade_one: "first" is graded at once, "second" once the
    test has made the file ``flag``."""
    import time
    while name != "first" and not os.path.exists(flag):
        time.sleep(0.01)
    return {"graded": name}


def test_a_ctrl_c_reaches_the_grader_not_its_workers(tmp_path, monkeypatch):
    """Ctrl-C at a terminal goes to every process of the command: a pool worker took it as
    its own KeyboardInterrupt and printed 'Process ForkProcess-1:' (and its traceback, when
    the grader's kill came late) into the instructor's terminal. The grader alone stops the
    class (it kills its workers itself); a worker goes on with the submission in hand."""
    import signal
    from grader.instructor import batch
    monkeypatch.setattr(batch, "grade_one", _answer_once_flagged)
    flag = tmp_path / "go"
    before = _children()
    outcomes = batch._local_pool([batch.Job(s, s) for s in ("first", "second")], 1, (str(flag),))
    try:
        assert next(outcomes)[1] == {"graded": "first"}
        [worker] = _children() - before
        os.kill(worker, signal.SIGINT)            # as the terminal sends it, to the worker too
        flag.write_text("")                       # the second submission ends after the signal
        try:
            result = next(outcomes)[1]
        except KeyboardInterrupt as e:            # the worker's, sent back as its result
            result = e
        assert result == {"graded": "second"}
    finally:
        outcomes.close()


# ---------------------------------------------------------------------------- determinism, resuming

def test_same_results_whatever_the_number_of_workers(tmp_path):
    make_class(tmp_path / "class", "lesson1", 10, seed=3, slow=0)
    reports = []
    for jobs in (1, 2):
        with open_gradebook(str(tmp_path / f"gb{jobs}.db")) as book:
            s = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=jobs, progress=False)
            assert s.graded == 10 and not s.failed
            reports.append({r.student: stable(r.report) for r in book.results()})
    assert reports[0] == reports[1]


@pytest.mark.parametrize("force", [False, True], ids=["resumed", "forced"])
def test_a_graded_result_is_kept_when_its_file_can_no_longer_be_graded(tmp_path, force):
    """A class graded again after its folder was synced anew, where one file came down empty
    and one student handed in a second file: their 10 of 10 and its report were replaced by
    an error row of 0 points, for good, and the summary said only 'failed'. A student with
    no graded result still gets the error row."""
    folder = tmp_path / "class"
    folder.mkdir()
    solution = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
    for student in ("alice", "bob", "carol"):
        (folder / f"{student}.py").write_text(solution)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        before = {r.student: r.report for r in book.results("lesson1")}
        (folder / "alice.py").write_text("")
        (folder / "bob").mkdir()
        (folder / "bob" / "lesson1").mkdir()
        (folder / "bob" / "lesson1" / "exercise.py").write_text(solution)
        (folder / "dan.py").write_text("")
        again = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, force=force, progress=False)
        kept = "; their graded result in the gradebook is kept (grader gradebook forget removes it)"
        assert dict(again.failed) == {
            "alice": "alice.py: the submission is empty" + kept,
            "bob": ("bob/lesson1/exercise.py: two submissions: bob/lesson1/exercise.py and bob.py; "
                    "keep one" + kept),
            "dan": "dan.py: the submission is empty"}
        after = {r.student: r for r in book.results("lesson1")}
        assert {s: after[s].report for s in ("alice", "bob")} == {s: before[s] for s in ("alice", "bob")}
        assert (after["dan"].status, after["dan"].error) == ("error", "the submission is empty")


def test_rerun_skips_what_is_graded_and_regrades_what_changed(tmp_path):
    students = make_class(tmp_path / "class", "lesson1", 6, seed=4, slow=0)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        first = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, progress=False)
        assert (first.graded, first.skipped) == (6, 0)
        before = {r.student: stable(r.report) for r in book.results()}
        again = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, progress=False)
        assert (again.graded, again.skipped) == (0, 6)
        students[0].path.write_text(students[0].path.read_text() + "\n# edited\n")
        edited = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, progress=False)
        assert (edited.graded, edited.skipped) == (1, 5)
        forced = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, force=True,
                           progress=False)
        assert (forced.graded, forced.skipped) == (6, 0)
        kept = {r.student: stable(r.report) for r in book.results()}
        # Another secret draws other hidden cases: refused before any work, the results kept
        # (a mistyped --secret-file replaced every grade of the class, one by one).
        with pytest.raises(InputError, match="^--secret-file: draws other hidden cases than 6 lesson1 results in the gradebook"):
            run_batch("lesson1", tmp_path / "class", COURSE, b"another secret", book, jobs=2, progress=False)
        assert {r.student: stable(r.report) for r in book.results()} == kept
        other = run_batch("lesson1", tmp_path / "class", COURSE, b"another secret", book, jobs=2,
                          force=True, progress=False)
        assert other.graded == 6                  # --force: the whole class on the other cases
        again = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, force=True,
                          progress=False)
        after = {r.student: stable(r.report) for r in book.results()}
    changed = {s.name for s in students[:1]}
    assert {k: v for k, v in after.items() if k not in changed} == \
           {k: v for k, v in before.items() if k not in changed}


def test_kill_minus_9_at_random_moments_then_resume(tmp_path, secret_file):
    make_class(tmp_path / "class", "lesson1", 16, seed=5, slow=0)
    killed = f"sqlite:///{tmp_path / 'killed.db'}"
    summary = kill_and_resume(tmp_path / "class", killed, secret_file, kills=3, seed=11)
    assert summary["students"] == 16 and not summary["failed"]
    with open_gradebook(str(tmp_path / "straight.db")) as book:
        run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, progress=False)
    resumed, straight = by_student(killed), by_student(f"sqlite:///{tmp_path / 'straight.db'}")
    assert set(resumed) == set(straight) and len(resumed) == 16
    assert {s: stable(r.report) for s, r in resumed.items()} == \
           {s: stable(r.report) for s, r in straight.items()}
    assert_whole(killed, 6)


# ---------------------------------------------------------------------------- every lesson

@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_grades_in_a_batch(lesson, tmp_path):
    """The batch path is lesson-agnostic: the reference, in a class folder, full marks."""
    folder = tmp_path / "class"
    (folder / "submitted" / "ref" / lesson).mkdir(parents=True)
    if lesson == "lesson6":     # a folder of YAML, and the reference answer of ref's own incident
        from grader.course.bundle import write_answer
        from grader.course.incident import incidents_key, student_incident
        write_answer(student_incident(COURSE, incidents_key(SECRET), "ref"), folder / "submitted" / "ref" / lesson)
    else:
        (folder / "submitted" / "ref" / lesson / "exercise.py").write_text(templates(lesson)["reference"].read_text())
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        s = run_batch(lesson, folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert not s.failed and s.graded == 1
        [ref] = book.results()
        assert ref.score == ref.max_score and ref.lesson == lesson
        # Resumed with the same secret, the result counts as done (lesson 6's cases are the
        # student's own incident: the gradebook's cases must still match the class's).
        again = run_batch(lesson, folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (again.graded, again.skipped) == (0, 1)


# ---------------------------------------------------------------------------- a class of 200

@pytest.mark.parametrize("lesson", LESSONS)
def test_a_class_is_drawn_from_the_real_files_and_every_mutant(lesson):
    pool = templates(lesson)
    real = {p.stem for p in (SUBMISSIONS / lesson).glob("*.py")}
    assert list(pool)[0] == "reference" and set(pool) == {"reference"} | real | set(mutations(lesson))
    assert templates(lesson) == pool                      # the mutants are written once


@pytest.mark.parametrize("n", [5, 14, 21, 28, 35])
def test_a_class_holds_every_odd_name_whatever_its_size(n, tmp_path):
    """Lesson 2's covering class grew to 21 students with two more mutants, and every
    seventh place came round to the first: two odd names were lost, and the class test
    failed at its export of them."""
    from classroom import ODD_NAMES
    students = make_class(tmp_path / "class", "lesson1", n, seed=1, slow=0)
    assert set(ODD_NAMES) <= {s.name for s in students}


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2"])
def test_a_class_of_every_kind_grades_resumes_exports_and_nbgrader_agrees(lesson, tmp_path, secret_file):
    """Lesson 1 grades in a fraction of a second per student; lesson 2 runs the worker with
    the learner's ledger in the sandbox (about 2.5 s of CPU per student): both kinds of
    class. The class holds every kind of submission (the reference, each real test file
    once: correct, wrong, raising, unloadable; two loopers where the lesson has them; the
    odd names) and is killed once mid-run; the class of 200 is bench/class_of_200.py.
    Lesson 2's 29 mutants are wrong ledgers as its real wrong file is, to a class: each is
    graded in test_lesson2, and a class of them all took two minutes here."""
    check_class(lesson, covering_size(lesson, mutants=False), tmp_path, secret_file,
                standalone_scores(lesson, mutants=False), cover=True, mutants=False)


def test_a_rubric_edited_without_a_new_version_is_refused_before_any_grade(tmp_path, course):
    """The same version must mean the same rubric: else a resumed class keeps the old
    grades of the students already done, and the totals mix two rubrics."""
    import shutil
    from grader.engine.errors import InputError
    from grader.engine.layout import Course
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(ROOT / "reference" / "solutions" / "lesson1.py", folder / "alice.py")
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    with open_gradebook(url) as book:
        first = run_batch("lesson1", folder, Course(course), SECRET, book, jobs=1, progress=False)
        assert first.graded == 1
        rubric = course / "rubrics" / "lesson1.yaml"
        text = rubric.read_text()
        edited = text.replace("points: 3\n", "points: 4\n", 1)
        assert edited != text
        rubric.write_text(edited)
        with pytest.raises(InputError) as e:
            run_batch("lesson1", folder, Course(course), SECRET, book, jobs=1, progress=False)
        assert str(e.value) == (f"{rubric}: changed since the gradebook's results of version 1 "
                                "(contract-ok 3 -> 4 points; total 10 -> 11): raise its version to "
                                "grade with it (every result is then graded again)")
        rubric.write_text(edited.replace("version: 1\n", "version: 2\n", 1))
        again = run_batch("lesson1", folder, Course(course), SECRET, book, jobs=1, progress=False)
        assert again.graded == 1 and [l.max_score for l in book.lessons()] == [11]


def test_a_students_name_is_one_name_however_unicode_spells_it(tmp_path):
    """A macOS zip spells "José Núñez" decomposed (NFD): the same student as the composed
    spelling, and two files of theirs are two submissions, not two students."""
    import unicodedata
    nfc = "José Núñez"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / f"{nfd}.py").write_text("x = 1\n")
    [entry] = discover(alone, "lesson1")
    assert entry.student == nfc and not entry.problem
    both = tmp_path / "both"
    both.mkdir()
    (both / f"{nfd}.py").write_text("x = 1\n")
    (both / f"{nfc}.py").write_text("x = 2\n")
    [entry] = discover(both, "lesson1")
    assert entry.student == nfc and entry.problem.startswith("two submissions")
    # Named within the class folder: the student reads it in their feedback.
    assert entry.problem == f"two submissions: {nfd}.py and {nfc}.py; keep one" and str(tmp_path) not in entry.problem


@pytest.mark.parametrize("students,says", [(1, "lesson1: 1 student: 1 graded now"),
                                           (2, "lesson1: 2 students: 1 graded now")])
def test_the_summary_counts_students_in_words(students, says):
    summary = BatchSummary("lesson1", students, 1, students - 1, (), (10.0,), 10.0, 2.0, "1 process")
    assert summary.render().splitlines()[0].startswith(says)


def test_the_summary_names_the_gradebook_the_results_went_to(tmp_path, secret_file):
    """The default gradebook is the course's, which need not be where the command ran: the
    summary says where the results are, as the URL --gradebook takes, its password masked."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    db = tmp_path / "gb.db"
    for as_json in (False, True):
        p = run_cli("grade", "lesson1", str(folder), "--secret-file", str(secret_file), "--gradebook",
                    str(db), "--quiet", *(["--json"] if as_json else []))
        assert p.returncode == 0, p.stderr
        said = json.loads(p.stdout)["gradebook"] if as_json else p.stdout.splitlines()[1]
        assert said == (f"sqlite:///{db}" if as_json else f"gradebook: sqlite:///{db}")
    summary = BatchSummary("lesson1", 1, 1, 0, (), (10.0,), 10.0, 2.0, "1 process",
                           "postgresql+psycopg://grader:***@db/course")
    assert summary.render().splitlines()[1] == "gradebook: postgresql+psycopg://grader:***@db/course"


def test_a_disk_that_fills_up_mid_class_stops_it_keeping_every_result_and_a_rerun_grades_the_rest(tmp_path,
                                                                                                   secret_file):
    """The disk full after a few results (here a file-size limit the gradebook's journal
    runs into): one line naming the gradebook and the student whose result could not be
    written; what was written stays, and the same command grades the rest."""
    from conftest import run_grader
    folder = tmp_path / "class"
    folder.mkdir()
    solution = (ROOT / "reference/solutions/lesson1.py").read_text()
    for n in range(12):
        (folder / f"s{n:02}.py").write_text(f"{solution}\n# {n}\n")     # twelve submissions, twelve digests
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    args = ("grade", "lesson1", str(folder), "--secret-file", str(secret_file), "--gradebook", url,
            "--jobs", "1", "--quiet")
    code, out, err = run_grader(*args, full_disk_at=120_000)
    assert code == 2 and out == "", err
    assert err.startswith(f"grader: {url}: cannot write s") and err.count("\n") == 1, err
    assert err.endswith("results this run, and every result written is kept: once that is fixed "
                        "(space freed, the lock let go), the same command grades the rest\n"), err
    kept = by_student(url)
    assert 0 < len(kept) < 12 and all(r.score == 10 for r in kept.values())
    code, out, err = run_grader(*args)
    assert code == 0, err
    assert out.startswith(f"lesson1: 12 students: {12 - len(kept)} graded now, {len(kept)} already graded, "
                          "0 failed"), out


@pytest.mark.parametrize("force", [False, True])
def test_a_write_that_fails_says_what_the_next_run_does(force):
    """Under --force the same command grades every student again: its message must not say
    it grades the rest (nor fail to be said: the non-forced run is the one the test above
    drives through a full disk)."""
    from grader.instructor.batch import Job, _record_outcomes
    from grader.instructor.gradebook import GradebookWriteError

    class Full:
        def record(self, student, result):
            raise GradebookWriteError("gb.db", f"cannot write {student}'s result: disk I/O error")

    class Outcomes(list):
        def close(self):
            pass

    class Bar:
        def advance(self):
            pass

        def finish(self):
            pass

    with pytest.raises(GradebookWriteError) as e:
        _record_outcomes(Outcomes([(Job("alice", None), object())]), 3, Full(), None, Bar(), force)
    said = str(e.value)
    assert "stopped after 0 of 3 results this run, and every result written is kept" in said
    assert said.endswith("--force grades every student again, so the same command starts over (without it, "
                         "a run grades only the rest, and refuses while results of another grader or secret "
                         "remain)") if force else said.endswith("the same command grades the rest")
