"""Resuming a batch: what a re-run grades again. Only a graded result of the same file,
under the same rubric version and the same cases (so the same secret), counts as done."""
import shutil

import pytest
import yaml

from conftest import ROOT, SECRET
from grader.engine.layout import Course, find_course
from grader.engine.submission import Submission
from grader.instructor.batch import Entry, pending, run_batch
from grader.instructor.gradebook import open_gradebook

COURSE = find_course(str(ROOT))


def _submission(digest: str) -> Submission:
    return Submission(path="alice.py", source="x = 1\n", digest=digest)


@pytest.mark.parametrize("key,graded_again", [
    (("alice", "d1", 3, "cases"), False),     # the same file, rubric and cases: done
    (("alice", "d0", 3, "cases"), True),      # another file
    (("alice", "d1", 2, "cases"), True),      # another rubric version
    (("alice", "d1", 3, "other"), True),      # other cases: another secret
    (("bob", "d1", 3, "cases"), True),        # another student's result
])
def test_pending_needs_every_part_of_the_key(key, graded_again):
    assert pending(Entry("alice", "alice.py"), _submission("d1"), {key}, 3, "cases") is graded_again
    assert pending(Entry("alice", "alice.py"), _submission("d1"), set(), 3, "cases") is True


def _class(folder):
    folder.mkdir()
    (folder / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "bob.py").write_text((ROOT / "assignments/lesson1/exercise.py").read_text())
    (folder / "carol.py").write_bytes(b"\x00\x01")           # unreadable: an error row
    return folder


def _bumped_rubric(tmp_path, monkeypatch) -> int:
    """The lesson 1 rubric with its version raised, where the course looks for it."""
    rubrics = tmp_path / "rubrics"
    rubrics.mkdir()
    shutil.copy(ROOT / "rubrics" / "rubric.schema.json", rubrics)
    data = yaml.safe_load((ROOT / "rubrics" / "lesson1.yaml").read_text())
    data["version"] += 1
    (rubrics / "lesson1.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    original = Course.rubric_path
    monkeypatch.setattr(Course, "rubric_path",
                        lambda self, lesson: rubrics / f"{lesson}.yaml" if lesson == "lesson1"
                        else original(self, lesson))
    return data["version"]


def test_a_changed_rubric_version_is_graded_again_and_then_kept(tmp_path, monkeypatch):
    folder = _class(tmp_path / "class")
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        first = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (first.graded, first.skipped, len(first.failed)) == (2, 0, 1)
        old_version = {r.student: r.rubric_version for r in book.results()}["alice"]
        again = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (again.graded, again.skipped, len(again.failed)) == (0, 2, 1)   # the error is retried

        version = _bumped_rubric(tmp_path, monkeypatch)
        assert version == old_version + 1
        bumped = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (bumped.graded, bumped.skipped) == (2, 0)
        stored = {r.student: r for r in book.results()}
        assert stored["alice"].rubric_version == stored["bob"].rubric_version == version
        assert stored["alice"].report["rubric_version"] == version
        kept = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (kept.graded, kept.skipped) == (0, 2)


def test_graded_keys_are_the_graded_results_of_that_lesson_only(tmp_path):
    folder = _class(tmp_path / "class")
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        results = {r.student: r for r in book.results()}
        keys = book.graded_keys("lesson1")
        assert keys == {(s, results[s].submission_digest, results[s].rubric_version,
                         results[s].cases_digest) for s in ("alice", "bob")}
        assert all(len(k[1]) == 64 and len(k[3]) == 64 for k in keys)
        assert results["carol"].status == "error"
        assert book.graded_keys("lesson2") == set()


def test_graded_keys_leave_out_every_other_lesson_and_every_error(tmp_path):
    # Lessons on both sides of the one asked (in any order a query could compare them) and
    # an error row of that lesson: none of them is a done grade of it.
    from test_gradebook import fake_report
    from grader.instructor.gradebook import LessonInfo
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student, lesson, digest in (("ann", "lesson0", "a"), ("bea", "lesson1", "b"),
                                        ("cy", "lesson2", "c"), ("dee", "lesson10", "d")):
            book.record(student, fake_report(lesson=lesson, digest=digest * 64))
        book.record_error("eve", LessonInfo("lesson1", "T", 1, 3.0, ()), "eve.py", "unreadable", "e" * 64)
        [cases] = {r.cases_digest for r in book.results() if r.student == "bea"}
        assert book.graded_keys("lesson1") == {("bea", "b" * 64, 1, cases)}
        assert {k[0] for k in book.graded_keys("lesson10")} == {"dee"}
        assert book.graded_keys("lesson") == set()
