"""A grade is a function of the submission, the lesson, the rubric and the secret: the same
bytes give the same report (duration_s aside) whatever else changes between two runs."""
import json
import os
import random
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import yaml

from conftest import ROOT, SECRET, SUBMISSIONS, grade
from grader.engine.layout import find_course
from grader.engine.sandbox.session import Sandbox
from grader.engine.submission import load_folder, load_submission
from grader.instructor.batch import discover, run_batch
from grader.instructor.gradebook import open_gradebook

COURSE = find_course(str(ROOT))
LESSON1 = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
WRONG = SUBMISSIONS / "lesson1" / "wrong_types.py"


def stable(report) -> dict:
    d = report.to_dict()
    d.pop("duration_s")
    return d


# ---------------------------------------------------------------------------- the grader's process

def test_the_same_grade_under_another_hash_seed_directory_locale_zone_and_course_path(tmp_path):
    """The grader's own str hash seed, its working directory, its locale and time zone, and
    a copy of the course reached through a symbolic link: none of them reaches a report."""
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    copy = tmp_path / "real" / "course"
    shutil.copytree(ROOT / "rubrics", copy / "rubrics")
    shutil.copytree(ROOT / "assignments", copy / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "linked").symlink_to(tmp_path / "real", target_is_directory=True)
    files = [str(ROOT / "reference" / "solutions" / "lesson1.py"), str(WRONG),
             str(SUBMISSIONS / "lesson1" / "raises.py")]     # absolute: one name in both runs

    def reports(cwd, course, **env):
        # PYTHONPATH: this checkout's grader, whatever the working directory.
        p = subprocess.run([sys.executable, "-m", "grader.cli", "--course", str(course), "grade", "lesson1",
                            *files, "--secret-file", str(secret), "--json"], cwd=cwd, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
        assert p.returncode == 0, p.stderr
        return [{k: v for k, v in json.loads(line).items() if k != "duration_s"} for line in p.stdout.splitlines()]

    first = reports(ROOT, ROOT, PYTHONHASHSEED="0", LANG="C.UTF-8", LC_ALL="C.UTF-8", TZ="UTC")
    assert len(first) == 3 and first[0]["score"] == first[0]["max_score"] > first[1]["score"]
    assert first == reports(tmp_path, tmp_path / "linked" / "course", PYTHONHASHSEED="1", LANG="C",
                            LC_ALL="C", TZ="Pacific/Kiritimati")


# ---------------------------------------------------------------------------- the learner's child

def test_a_childs_str_hash_seed_is_fixed_and_a_restart_takes_another():
    """Each interpreter draws its own str hash seed unless told one: a submission that
    iterates a set of strings would answer differently at every grade. A restarted child
    must still hash differently (lesson 4 catches keys built on hash() that way)."""
    source = "def h(text):\n    return hash(text)\n"
    with Sandbox(source, "h.py") as one, Sandbox(source, "h.py") as two:
        first = one.call("h", "serving").value
        assert isinstance(first, int)
        assert two.call("h", "serving").value == first
        one.restart()
        again = one.call("h", "serving").value
        assert isinstance(again, int) and again != first


def test_answers_that_hang_on_str_hashes_grade_the_same_twice(tmp_path):
    """A wrong answer on about half the inputs, which half picked by str hash: two grades
    (four children) give one report."""
    path = tmp_path / "hashed.py"
    path.write_text(LESSON1.replace("    return -(-tokens // page_tokens)\n",
                                    "    return -(-tokens // page_tokens) + (hash(str(tokens)) & 1)\n"))
    first = grade("lesson1", path, mode="grade", secret=SECRET)
    feedback = next(c.feedback for c in first.criteria if c.id == "pages-for")
    wrong, _, total = feedback.partition(" token counts wrong")[0].partition(" of ")
    assert 0 < int(wrong) < int(total), feedback          # which ones: the seed's choice
    assert stable(grade("lesson1", path, mode="grade", secret=SECRET)) == stable(first)


# ---------------------------------------------------------------------------- a class

def _class(folder: Path) -> Path:
    """Three students in nbgrader's layout: a full answer, a wrong one, an unreadable one."""
    for student, data in (("alice", LESSON1.encode()), ("bob", WRONG.read_bytes()), ("carol", b"\x00\x01")):
        (folder / "submitted" / student / "lesson1").mkdir(parents=True)
        (folder / "submitted" / student / "lesson1" / "exercise.py").write_bytes(data)
    return folder


def _stored(url: str) -> dict:
    with open_gradebook(url) as book:
        return {r.student: {**{k: v for k, v in vars(r).items() if k not in ("graded_at", "duration_s", "report_json")},
                            "report": {k: v for k, v in r.report.items() if k != "duration_s"}}
                for r in book.results()}


def test_a_class_is_recorded_the_same_wherever_it_lies(tmp_path, monkeypatch):
    """Results name a submission by its path inside the class folder: the same class graded
    from another folder, named by a relative path from another working directory, records
    the same rows, and no row holds where the instructor keeps it."""
    here = _class(tmp_path / "spring" / "class")
    there = tmp_path / "elsewhere" / "copy"
    shutil.copytree(here, there)
    with open_gradebook(str(tmp_path / "here.db")) as book:
        run_batch("lesson1", here, COURSE, SECRET, book, jobs=1, progress=False)
    monkeypatch.chdir(there.parent)
    with open_gradebook(str(tmp_path / "there.db")) as book:
        summary = run_batch("lesson1", Path("copy"), COURSE, SECRET, book, jobs=1, progress=False)
    assert summary.failed == (("carol", "carol/lesson1/exercise.py: is a binary file, not Python "
                                        "source or a notebook"),)
    rows = _stored(f"sqlite:///{tmp_path / 'here.db'}")
    assert rows == _stored(f"sqlite:///{tmp_path / 'there.db'}")
    assert {s: r["submission_path"] for s, r in rows.items()} == \
           {s: f"{s}/lesson1/exercise.py" for s in ("alice", "bob", "carol")}
    assert rows["alice"]["report"]["submission"] == "alice/lesson1/exercise.py"
    assert str(tmp_path) not in json.dumps(rows, default=str)


# ---------------------------------------------------------------------------- a notebook

def _notebook(*cells: tuple[str, str]) -> str:
    return json.dumps({"cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(True),
                                  **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                                 for kind, text in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_notebook_of_the_same_code_gets_the_py_files_report(tmp_path):
    """The same code as one notebook cell: the same scores and feedback, a line named by its
    cell (the flattened source's own numbering, one header line further, named nothing
    the learner can find)."""
    raises = SUBMISSIONS / "lesson1" / "raises.py"
    (tmp_path / "raises.ipynb").write_text(_notebook(("code", raises.read_text())))
    as_py, as_nb = stable(grade("lesson1", raises)), stable(grade("lesson1", tmp_path / "raises.ipynb"))
    assert "(raises.py line 6)" in json.dumps(as_py)
    for report in (as_py, as_nb):
        del report["submission"], report["submission_digest"]
    assert json.dumps(as_nb).replace("raises.ipynb cell 1, line", "raises.py line") == json.dumps(as_py)


def test_a_notebook_line_is_named_by_its_cell(tmp_path):
    path = tmp_path / "work.ipynb"
    path.write_text(_notebook(("markdown", "# My answer\n"),
                              ("code", "%matplotlib inline\nfrom reference.shapes import Verdict\n"),
                              ("code", "def pages_for(tokens, page_tokens):\n"
                                       "    raise ValueError('not yet')\n")))
    feedback = next(c.feedback for c in grade("lesson1", path).criteria if c.id == "pages-for")
    assert "(work.ipynb cell 3, line 2)" in feedback, feedback
    path.write_text(_notebook(("code", "x = 1\n"), ("code", "y = 2\ndef f(:\n")))
    feedback = grade("lesson1", path).criteria[0].feedback
    assert feedback == "your file did not load: SyntaxError: invalid syntax (work.ipynb cell 2, line 2)", feedback


def test_a_class_is_found_the_same_whatever_order_its_folder_lists(tmp_path, monkeypatch):
    """Discovery and a folder submission's notes never depend on the order in which the file
    system lists a folder (it differs between file systems, and with the order of creation)."""
    nb = tmp_path / "nb" / "submitted"
    for student, names in (("alice", ("b.py", "a.ipynb")), ("bob", ("exercise.py", "scratch.py")),
                           ("carol", ("lesson1.py",))):
        (nb / student / "lesson1").mkdir(parents=True)
        for name in names:
            (nb / student / "lesson1" / name).write_text("x = 1\n")
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("dan.py", "dan.ipynb", unicodedata.normalize("NFD", "José") + ".py", "José.ipynb", "eve.py",
                 "notes.txt"):
        (flat / name).write_text("x = 1\n")
    lesson6 = tmp_path / "erin"
    lesson6.mkdir()
    for name in ("diagnosis.yaml", "design_sheet.yaml", "z.txt", "a.txt", "m.yaml"):
        (lesson6 / name).write_text("x: 1\n")

    def found():
        return (discover(tmp_path / "nb", "lesson1"), discover(flat, "lesson1"),
                load_folder(lesson6, ("diagnosis.yaml", "design_sheet.yaml")))

    listed = Path.iterdir
    first = found()
    for seed in range(4):
        def shuffled(self, seed=seed):
            entries = list(listed(self))
            random.Random(seed).shuffle(entries)
            return iter(entries)
        monkeypatch.setattr(Path, "iterdir", shuffled)
        assert found() == first


def test_a_lesson6_folder_is_the_student_its_path_names(tmp_path, monkeypatch):
    """A folder named on the command line is the student its path names, as in a class: a
    symbolic link is not followed to another student's name (and so another incident)."""
    files = ("diagnosis.yaml", "design_sheet.yaml")
    alice = tmp_path / "submitted" / "alice" / "lesson6"
    alice.mkdir(parents=True)
    (alice / "diagnosis.yaml").write_text("incident: x\n")
    (tmp_path / "submitted" / "bob").symlink_to("alice", target_is_directory=True)
    (tmp_path / "carol").symlink_to(alice, target_is_directory=True)
    assert load_submission(alice, files).student == "alice"
    assert load_submission(tmp_path / "submitted" / "bob" / "lesson6", files).student == "bob"
    assert load_submission(tmp_path / "carol", files).student == "carol"
    assert {e.student for e in discover(tmp_path, "lesson6")} == {"alice", "bob"}
    monkeypatch.chdir(alice)
    assert load_submission(Path("."), files).student == "alice"
    assert load_submission(Path("../lesson6"), files).student == "alice"


def test_files_named_one_by_one_are_the_students_a_class_would_name(tmp_path, monkeypatch):
    """`grade ... --gradebook` of submissions named one by one records each under the
    student a class's discovery would find: an nbgrader folder's student (not its lesson6
    folder's name, which made every student one row), a file's name in NFC."""
    from grader import cli
    from grader.engine import pipeline
    from grader.engine.report import Report

    def graded(lesson, path, course, **kw):       # the gradebook's side alone: no grading
        version = yaml.safe_load((ROOT / "rubrics" / f"{lesson}.yaml").read_text())["version"]
        return Report(lesson, "t", "grade", str(path), "d" * 64, version, (), (), "-", "0", 0.0)

    monkeypatch.setattr(pipeline, "grade_path", graded)
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    nfd = unicodedata.normalize("NFD", "José")
    folders = [tmp_path / "submitted" / name / "lesson6" for name in ("alice", nfd)]
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / "diagnosis.yaml").write_text("incident: x\n")
    (tmp_path / f"{nfd}.py").write_text("x = 1\n")
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    for lesson, paths in (("lesson6", folders), ("lesson1", [tmp_path / f"{nfd}.py"])):
        assert cli.main(["grade", lesson, *map(str, paths), "--secret-file", str(secret),
                         "--gradebook", url, "--json"]) == 0
    with open_gradebook(url) as book:
        assert sorted((r.lesson, r.student) for r in book.results()) == \
               [("lesson1", "José"), ("lesson6", "José"), ("lesson6", "alice")]
