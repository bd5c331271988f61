"""One rule for which file is a code submission (grader/engine/code_file.py): a class folder
(nbgrader's <student>/<lesson>/, a flat folder), a file named on the command line and a
Gradescope upload read the same files the same way: the suffix in any case, and among
several files the one that defines most of the lesson's functions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, SECRET, grade, run_grader
from grader.engine.errors import InputError
from grader.engine.layout import find_course
from grader.engine.submission import load_submission
from grader.instructor.batch import discover
from grader.instructor.gradescope import upload

COURSE = find_course(str(ROOT))
REFERENCE = (ROOT / "reference" / "solutions" / "lesson1.py").read_text()
# The lesson's five functions, written out here rather than read from the stub.
ALL = "".join(f"def {f}(*a):\n    return 0\n" for f in (
    "kv_bytes_per_token", "pages_for", "pool_pages", "worst_case_pages", "check_contract"))
TWO = "def pages_for(*a):\n    return 0\ndef pool_pages(*a):\n    return 0\n"
NONE = "x = 1\n"
STUB = (ROOT / "assignments" / "lesson1" / "exercise.py").read_text()
STUB_FORMS = ('def kv_bytes_per_token(m):\n    """Bytes."""\n    raise NotImplementedError\n'
              "def pages_for(t, p):\n    pass\n"
              "def pool_pages(m, w):\n    ...\n"
              "async def worst_case_pages(r, w):\n    raise NotImplementedError('later')\n"
              'def check_contract(r, m, w):\n    """Only its docstring."""\n')


def notebook(code: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": code.splitlines(True)}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


# files -> the one graded, or (None, what the problem says)
CASES = {
    "one file, its suffix upper case": ({"Mine.PY": ALL}, "Mine.PY"),
    "one notebook, its suffix mixed case": ({"work.IpYnB": notebook(ALL)}, "work.IpYnB"),
    "the file with most of the functions": ({"a.py": TWO, "b.ipynb": notebook(ALL)}, "b.ipynb"),
    "most of the functions beats the name": ({"exercise.py": TWO, "mine.py": ALL}, "mine.py"),
    "the name breaks a tie": ({"lesson1.PY": ALL, "copy.py": ALL}, "lesson1.PY"),
    # The untouched stub uploaded beside the learner's own file (their whole folder): its
    # functions are declared, not written, and the name does not win the learner's work away.
    "the stub left beside one's own file": ({"exercise.py": STUB, "mine.py": ALL}, "mine.py"),
    "a stub's body in any of its forms": ({"exercise.py": STUB_FORMS, "mine.py": TWO}, "mine.py"),
    "the stub beside nothing written": ({"exercise.py": STUB, "notes.py": NONE}, "exercise.py"),
    "the name breaks a tie at none": ({"exercise.py": NONE, "scratch.py": NONE}, "exercise.py"),
    "a tie": ({"a.py": ALL, "b.py": ALL},
              (None, "several submission files (a.py, b.py), and more than one defines the most")),
    "none defines any": ({"a.py": NONE, "b.py": NONE},
                         (None, "several submission files (a.py, b.py), and none defines any")),
    "no code file": ({"answers.txt": ALL, "mine.py.txt": ALL}, (None, "no .py or .ipynb file")),
}


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


@pytest.mark.parametrize("files, expected", CASES.values(), ids=CASES.keys())
def test_a_class_folder_and_a_gradescope_upload_choose_the_same_file(tmp_path, files, expected):
    lesson_folder = tmp_path / "class" / "submitted" / "alice" / "lesson1"
    _write(lesson_folder, files)
    [entry] = discover(tmp_path / "class", "lesson1", COURSE)
    gradescope_upload = tmp_path / "submission"
    _write(gradescope_upload, files)
    functions = tuple(l[4:l.index("(")] for l in ALL.splitlines() if l.startswith("def "))
    picked = upload.pick_code(gradescope_upload, "lesson1", functions)
    if isinstance(expected, str):
        assert Path(entry.path).name == expected and not entry.problem, entry
        assert isinstance(picked, upload.Picked) and picked.shown == expected, picked
        # Where there was a choice, both say which file was graded and which were not.
        assert (entry.note == "") == (len(files) == 1)
        assert picked.notes == ((entry.note,) if entry.note else ())
        if entry.note:
            assert entry.note.startswith(f"graded {expected}, ") and "not graded: " in entry.note
    else:
        says = expected[1]
        assert says in entry.problem, entry
        assert isinstance(picked, upload.Missing) and says in picked.why, picked


@pytest.mark.parametrize("files, way", [
    ({"a.py": ALL, "b.py": ALL}, "keep one, or name it exercise.py"),
    ({"exercise.py": ALL, "lesson1.py": ALL}, "keep one"),
], ids=["a-tie-of-other-names", "a-tie-of-submission-names"])
def test_a_tie_says_what_tells_the_files_apart(tmp_path, files, way):
    """Two files both named as the submission (exercise.py and lesson1.py) tie however one of
    them is renamed to exercise.py: the advice to do so changed nothing."""
    _write(tmp_path / "class" / "submitted" / "alice" / "lesson1", files)
    [entry] = discover(tmp_path / "class", "lesson1", COURSE)
    assert entry.problem.endswith(f"of the lesson's functions (kv_bytes_per_token, pages_for, "
                                  f"pool_pages, worst_case_pages, check_contract); {way}"), entry.problem


def test_a_flat_class_folder_takes_an_upper_case_suffix_as_its_students_file(tmp_path):
    _write(tmp_path / "class", {"alice.PY": ALL, "bob.py": ALL, "bob.Py": ALL, "carol.Ipynb": notebook(ALL),
                                "notes.txt": ALL})
    entries = {e.student: e for e in discover(tmp_path / "class", "lesson1", COURSE)}
    assert set(entries) == {"alice", "bob", "carol", "notes.txt"}
    assert not entries["alice"].problem and not entries["carol"].problem
    assert "two submissions: bob.Py and bob.py" in entries["bob"].problem
    assert "not a submission" in entries["notes.txt"].problem


def test_one_file_named_on_the_command_line_follows_the_same_rule(tmp_path):
    """grader grade lesson1 Alice.PY grades what a class folder and Gradescope grade; a file
    that is no code file is refused naming it."""
    upper = tmp_path / "Alice.PY"
    upper.write_text(REFERENCE)
    report = grade("lesson1", upper, "grade", SECRET)
    assert report.score == report.max_score == 10 and report.submission == str(upper)
    book = tmp_path / "notes.txt"
    book.write_text(REFERENCE)
    with pytest.raises(InputError, match=rf"^{book}: a submission is a \.py file or a \.ipynb notebook$"):
        load_submission(book)


def test_a_class_records_which_of_several_files_it_graded(tmp_path):
    """The note reaches the stored report, which the student's feedback is written from."""
    from grader.instructor.gradebook import open_gradebook
    _write(tmp_path / "class" / "submitted" / "alice" / "lesson1",
           {"exercise.py": TWO, "final.PY": REFERENCE})
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    db = tmp_path / "gb.db"
    code, _, err = run_grader("grade", "lesson1", str(tmp_path / "class"), "--secret-file", str(secret),
                              "--gradebook", str(db), "--jobs", "1", "--quiet")
    assert code == 0, err
    with open_gradebook(str(db), create=False) as book:
        [result] = book.results("lesson1")
    assert result.score == 10 and result.submission_path == "alice/lesson1/final.PY"
    assert ("graded final.PY, the file that defines the lesson's functions; not graded: exercise.py"
            in result.report["notes"])
