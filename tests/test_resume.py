"""Resuming a batch: what a re-run grades again. Only a graded result of the same file,
under the same rubric version, on the same cases (so the same secret) and by the same
grading code, counts as done."""
import shutil

import pytest
import yaml

from conftest import ROOT, SECRET
from grader.engine.fingerprint import grading_version
from grader.engine.layout import Course, find_course
from grader.engine.submission import Submission
from grader.instructor.batch import Entry, pending, run_batch
from grader.instructor.gradebook import open_gradebook

COURSE = find_course(str(ROOT))


def _submission(digest: str) -> Submission:
    return Submission(path="alice.py", source="x = 1\n", digest=digest)


@pytest.mark.parametrize("key,graded_again", [
    (("alice", "d1", 3, "cases", "code"), False),     # the same file, rubric, cases, code: done
    (("alice", "d0", 3, "cases", "code"), True),      # another file
    (("alice", "d1", 2, "cases", "code"), True),      # another rubric version
    (("alice", "d1", 3, "other", "code"), True),      # other cases: another secret
    (("alice", "d1", 3, "cases", "older"), True),     # other grading code
    (("bob", "d1", 3, "cases", "code"), True),        # another student's result
])
def test_pending_needs_every_part_of_the_key(key, graded_again):
    alice = Entry("alice", "alice.py")
    assert pending(alice, _submission("d1"), {key}, 3, "cases", "code") is graded_again
    assert pending(alice, _submission("d1"), set(), 3, "cases", "code") is True


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
                         results[s].cases_digest, grading_version()) for s in ("alice", "bob")}
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
        assert book.graded_keys("lesson1") == {("bea", "b" * 64, 1, cases, "0.1.0")}
        assert {k[0] for k in book.graded_keys("lesson10")} == {"dee"}
        assert book.graded_keys("lesson") == set()


def test_results_of_other_grading_code_are_refused_until_forced(tmp_path, monkeypatch):
    """An upgrade between two runs (or a result of an older grader): grading only what is
    missing would leave the class graded by two graders, silently. Refused before any
    work, naming the results and both graders; --force regrades everyone with this one."""
    from grader.engine.errors import InputError
    from grader.instructor import batch
    folder = _class(tmp_path / "class")
    (folder / "carol.py").unlink()
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        before = {r.student: r.report for r in book.results()}
        assert {r["grader_version"] for r in before.values()} == {grading_version()}
        (folder / "dan.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
        from grader.engine import pipeline
        for module in (batch, pipeline):      # the grader upgraded: its grades say so too
            monkeypatch.setattr(module, "grading_version", lambda: "0.1.0+upgraded")
        with pytest.raises(InputError) as refused:
            run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert refused.value.where == book.shown_url
        assert refused.value.message.startswith(
            f"2 lesson1 results (alice, bob) were graded by other grading code ({grading_version()}) "
            f"than this grader's (0.1.0+upgraded)")
        assert "--force" in refused.value.message and "gradebook forget" in refused.value.message
        assert {r.student: r.report for r in book.results()} == before      # nothing recorded
        forced = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, force=True, progress=False)
        assert (forced.graded, forced.skipped) == (3, 0)
        assert {r.report["grader_version"] for r in book.results()} == {"0.1.0+upgraded"}
        again = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert (again.graded, again.skipped) == (0, 3)


def test_a_worker_with_other_grading_code_grades_nothing():
    """A Dask worker with another copy of the grader: its grades would follow other rules
    than the rest of the class's. It fails the task (an error row saying why) instead."""
    from grader.instructor.batch import grade_one
    with pytest.raises(RuntimeError, match=r"this worker's grading code \(0\.1\.0\+[0-9a-f]{12}\) "
                                           r"is not the client's \(0\.1\.0\+client\)"):
        grade_one(str(ROOT), "lesson1", SECRET, "cases", "rubric", "0.1.0+client", False,
                  _submission("d1"))


def test_a_rubric_edited_during_the_grade_grades_no_one_by_it(tmp_path, monkeypatch):
    """A rubric edited while the class is graded (the instructor at it already, or another
    copy on a Dask worker's machine): the workers read it afresh, and the rest of the class
    was graded by other points under the same version, the gradebook totalling the two as
    one rubric. Each worker grades by the client's rubric or not at all."""
    from grader.instructor import batch
    version = _bumped_rubric(tmp_path, monkeypatch)          # a rubric of the test's own to edit
    rubric = tmp_path / "rubrics" / "lesson1.yaml"
    real = batch.grade_one

    def then_edited(*args):
        report = real(*args)
        rubric.write_text(rubric.read_text().replace("points: 2\n", "points: 3\n"))
        return report
    monkeypatch.setattr(batch, "grade_one", then_edited)
    folder = _class(tmp_path / "class")
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        s = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        graded = [r for r in book.results() if r.status == "graded"]
    assert s.graded == 1 and [r.max_score for r in graded] == [10.0]
    assert graded[0].rubric_version == version
    refused = dict(s.failed)["bob"]
    assert f"another lesson1 rubric than the client graded with ({rubric}" in refused


@pytest.fixture
def code_tree(tmp_path, monkeypatch):
    """A tree of the grading folders (and the instructor's, which the digest leaves out),
    each holding m.py, which the digest reads in place of the package: a function that
    digests it afresh."""
    from grader.engine import fingerprint
    for part in fingerprint.GRADING_CODE + ("grader/instructor",):
        (tmp_path / part).mkdir(parents=True)
        (tmp_path / part / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(fingerprint, "_ROOT", tmp_path)

    def digest():
        fingerprint.grading_version.cache_clear()
        return fingerprint.grading_version()
    yield digest
    fingerprint.grading_version.cache_clear()


def test_the_grading_code_digest_follows_the_grading_sources(tmp_path, code_tree):
    """Not the instructor's tools (recording and exporting change no grade), and every
    grading source, by name and content."""
    from grader.engine.fingerprint import GRADING_CODE
    digest = code_tree
    first = digest()
    assert first.startswith("0.1.0+") and len(first) == len("0.1.0+") + 12
    (tmp_path / "grader/instructor/m.py").write_text("x = 2\n")
    (tmp_path / "grader/instructor/__pycache__").mkdir()
    assert digest() == first
    for part in GRADING_CODE:
        (tmp_path / part / "m.py").write_text("x = 2\n")
        changed = digest()
        assert changed != first
        (tmp_path / part / "m.py").rename(tmp_path / part / "n.py")    # the name counts
        assert digest() not in (first, changed)
        (tmp_path / part / "n.py").rename(tmp_path / part / "m.py")
        (tmp_path / part / "m.py").write_text("x = 1\n")
        assert digest() == first
    (tmp_path / "reference/__pycache__").mkdir()
    (tmp_path / "reference/__pycache__/m.cpython-311.pyc").write_bytes(b"\0")
    assert digest() == first                                       # compiled copies do not


def test_the_grading_code_digest_passes_over_what_no_grade_loads(tmp_path, code_tree):
    """An editor's swap file or backup, a patch's leftover, a file manager's notes beside a
    lesson: no install ships them and no grade loads them, and a digest that read them
    refused a class as graded by other code while a lesson file was open in an editor."""
    digest = code_tree
    first = digest()
    (tmp_path / "grader/lessons/.m.py.swp").write_bytes(b"\0swap")
    (tmp_path / "grader/lessons/m.py~").write_text("x = 0\n")
    (tmp_path / "reference/.DS_Store").write_bytes(b"\0")
    (tmp_path / "grader/engine/m.py.orig").write_text("x = 0\n")     # a patch's leftover
    assert digest() == first
    for source in ("grader/lessons/m.py", "reference/data.yaml", "grader/course/data.json"):
        (tmp_path / source).write_text("x: 2\n")                      # a source still counts
        assert digest() != first
        first = digest()
