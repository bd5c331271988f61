"""Grading a class: discovery, per-student errors, determinism across workers, resuming
after kill -9, and a class of 200 that grades, resumes, exports and matches nbgrader."""
import contextlib
import csv
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from classroom import ODD_NAMES, make_class, templates
from conftest import ROOT, SECRET, SUBMISSIONS
from grader.instructor.batch import discover, run_batch
from grader.engine.layout import find_course
from grader.instructor.gradebook import open_gradebook
from grader.engine.pipeline import grade_path
from mutants import mutations

COURSE = find_course(str(ROOT))
LESSONS = COURSE.lessons()


def stable(report: dict) -> dict:
    """A report minus what may differ between two gradings of the same file."""
    return {k: v for k, v in report.items() if k != "duration_s"}


def by_student(url) -> dict:
    with open_gradebook(url) as book:
        return {r.student: r for r in book.results()}


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "course.secret"
    path.write_bytes(SECRET)
    return path


def standalone_scores(lesson: str) -> dict[str, dict[str, float]]:
    """Each template's criterion scores, graded once on its own (not in a batch)."""
    out = {}
    for name, path in templates(lesson).items():
        report = grade_path(lesson, path, COURSE, mode="grade", secret=SECRET)
        out[name] = {c.id: c.score for c in report.criteria}
    return out


# ---------------------------------------------------------------------------- discovery

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
    (tmp_path / "gradebook.db").write_text("")                           # beside submitted/: ignored
    entries = {e.student: e for e in discover(tmp_path, "lesson1")}
    assert set(entries) == {"alice", "bob", "carol", "dan"}
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
    (folder / "submitted" / "bob" / "lesson1").mkdir(parents=True)       # a link inside: fine
    (folder / "submitted" / "bob" / "lesson1" / "exercise.py").symlink_to(
        folder / "submitted" / "alice" / "lesson1" / "exercise.py")
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


def test_discover_flat_folder(tmp_path):
    for name in ("alice.py", "bob.ipynb", "carol.py", "carol.ipynb", "notes.txt", ".hidden.py"):
        (tmp_path / name).write_text("x = 1\n")
    entries = {e.student: e for e in discover(tmp_path, "lesson1")}
    assert set(entries) == {"alice", "bob", "carol", "notes.txt"}
    assert "two submissions" in entries["carol"].problem
    assert "not a submission" in entries["notes.txt"].problem


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
        other = run_batch("lesson1", tmp_path / "class", COURSE, b"another secret", book, jobs=2,
                          progress=False)
        assert other.graded == 6                  # other hidden cases: graded again
        again = run_batch("lesson1", tmp_path / "class", COURSE, SECRET, book, jobs=2, progress=False)
        after = {r.student: stable(r.report) for r in book.results()}
    changed = {s.name for s in students[:1]}
    assert {k: v for k, v in after.items() if k not in changed} == \
           {k: v for k, v in before.items() if k not in changed}


def kill_and_resume(folder, url, secret_file, kills, seed, jobs="2", lesson="lesson1"):
    """Start the batch and SIGKILL it once it has written a seeded number of results (a
    point of progress, not of time: the same on a fast machine and a loaded one), again
    and again, then let a last run finish: it must keep what the killed runs recorded."""
    students = len(discover(folder, lesson))
    # At least three students left at each point: a kill lands while the batch is grading.
    points = sorted(random.Random(seed).sample(range(1, students - 3), kills))
    args = ["grade", lesson, str(folder), "--secret-file", str(secret_file), "--gradebook",
            url, "--jobs", jobs, "--quiet", "--json"]
    for point in points:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600          # a hang guard only
        while graded_rows(url) < point:
            assert proc.poll() is None, f"the run ended with {graded_rows(url)} results, before {point}"
            assert time.monotonic() < deadline, f"fewer than {point} results after 600 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    p = run_cli(*args)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["skipped"] >= points[-1], summary      # what was recorded before the kill is kept
    return summary


def graded_rows(url: str) -> int:
    """Results the gradebook (SQLite) holds now, read without taking part in its writes."""
    path = url.removeprefix("sqlite:///")
    if not os.path.exists(path):
        return 0
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
            return conn.execute("SELECT count(*) FROM results WHERE status = 'graded'").fetchone()[0]
    except sqlite3.OperationalError:       # its tables are not created yet
        return 0


def assert_whole(url, n_criteria):
    """No partial rows: every graded result has all its criterion rows, summing to its total."""
    for r in by_student(url).values():
        if r.status == "graded":
            assert len(r.scores) == n_criteria
            assert abs(sum(s.score for s in r.scores) - r.score) < 1e-6


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


# ---------------------------------------------------------------------------- a class of 200

@pytest.mark.parametrize("lesson", LESSONS)
def test_a_class_is_drawn_from_the_real_files_and_every_mutant(lesson):
    pool = templates(lesson)
    real = {p.stem for p in (SUBMISSIONS / lesson).glob("*.py")}
    assert list(pool)[0] == "reference" and set(pool) == {"reference"} | real | set(mutations(lesson))
    assert templates(lesson) == pool                      # the mutants are written once


@pytest.mark.parametrize("lesson", ["lesson1", "lesson2"])
def test_class_of_200_grades_resumes_exports_and_nbgrader_agrees(lesson, tmp_path, secret_file):
    """Lesson 1 grades in a fraction of a second per student; lesson 2 runs the worker with
    the learner's ledger in the sandbox (about 2.5 s of CPU per student): both kinds of class."""
    from nbgrader.api import Gradebook as NbGradebook

    expected = standalone_scores(lesson)
    n_criteria = len(next(iter(expected.values())))
    students = make_class(tmp_path / "class", lesson, 200, seed=2026, slow=2)
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    summary = kill_and_resume(tmp_path / "class", url, secret_file, kills=1, seed=7, lesson=lesson)
    assert summary["students"] == 200 and not summary["failed"]
    stored = by_student(url)
    assert set(stored) == {s.name for s in students}           # every student exactly once
    for s in students:
        got = {c.criterion: c.score for c in stored[s.name].scores}
        assert got == expected[s.template], s
    assert_whole(url, n_criteria)

    # CSV: one row per student, names intact through Python's csv module.
    out = tmp_path / "grades.csv"
    assert run_cli("export", "--gradebook", url, "--format", "csv", "--out", str(out)).returncode == 0
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 200
    totals = {row["student"]: float(row[f"{lesson} total"]) for row in rows}
    assert set(ODD_NAMES) <= set(totals)
    assert totals == {name: r.score for name, r in stored.items()}

    # Gradescope: a results.json per submission whose tests add up to the total.
    gs = tmp_path / "gradescope"
    assert run_cli("export", "--gradebook", url, "--format", "gradescope", "--out", str(gs)).returncode == 0
    files = sorted(gs.glob(f"{lesson}/*/results.json"))
    assert len(files) == 200
    for path in files:
        data = json.loads(path.read_text())
        assert abs(sum(t["score"] for t in data["tests"]) - data["score"]) < 1e-6
        assert totals[data["extra_data"]["student"]] == data["score"]

    # nbgrader: the same totals in its gradebook.
    nbdb = tmp_path / "nbgrader" / "gradebook.db"
    nbdb.parent.mkdir()
    p = run_cli("export", "--gradebook", url, "--format", "nbgrader", "--out", str(nbdb))
    assert p.returncode == 0, p.stderr
    with NbGradebook(f"sqlite:///{nbdb}") as gb:
        nb_totals = {sub.student.id: sub.score for sub in gb.assignment_submissions(lesson)}
        assert gb.find_assignment(lesson).max_score == 10
    assert nb_totals.keys() == totals.keys()
    assert all(abs(nb_totals[k] - totals[k]) < 1e-6 for k in totals)
