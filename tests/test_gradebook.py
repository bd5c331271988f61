"""The gradebook: one transaction per result, one result per student and lesson, safe with
several writers, and everything a grade needs to be traced."""
import json
import multiprocessing

import pytest
import sqlalchemy as sa

from conftest import nothing_but_the_error
from grader.engine.errors import InputError
from grader.instructor.gradebook import (LessonInfo, cases_digest, criteria, lessons, open_gradebook,
                                         results, scores)


def fake_report(lesson="lesson1", digest="d" * 64, points=(2.0, 1.0), got=(2.0, 0.5),
                rubric_version=1, cases=({"family": "models", "name": "m", "visibility": "public"},),
                visibility=("both", "hidden")):
    criteria = [{"id": f"c{i}", "title": f"criterion {i}", "score": g, "max_score": p,
                 "passed": g >= p, "feedback": f"feedback {i}, with \"quotes\"",
                 "visibility": v, "evidence": []}
                for i, (p, g, v) in enumerate(zip(points, got, visibility))]
    return {"lesson": lesson, "title": "The request contract", "mode": "grade",
            "submission": "alice.py", "submission_digest": digest, "rubric_version": rubric_version,
            "criteria": criteria, "cases": list(cases), "isolation": "process",
            "grader_version": "0.1.0", "duration_s": 0.5, "notes": [],
            "score": sum(got), "max_score": sum(points), "cost_model": "synthetic"}


@pytest.fixture
def book(tmp_path):
    with open_gradebook(str(tmp_path / "gb.db")) as b:
        yield b


def test_record_and_read_back(book):
    report = fake_report()
    book.record("O'Brien, Pat", report)
    [r] = book.results("lesson1")
    assert (r.student, r.lesson, r.status, r.score, r.max_score) == ("O'Brien, Pat", "lesson1", "graded", 2.5, 3.0)
    assert r.submission_digest == "d" * 64 and r.rubric_version == 1
    assert r.cases_digest == cases_digest(report["cases"])
    assert r.report == report                             # the full JSON, exactly
    assert [s.criterion for s in r.scores] == ["c0", "c1"]
    assert r.scores[1].feedback == 'feedback 1, with "quotes"'
    assert r.graded_at.tzinfo is not None
    [info] = book.lessons()
    assert info.title == "The request contract" and info.max_score == 3.0
    assert [(c.id, c.visibility) for c in info.criteria] == [("c0", "both"), ("c1", "hidden")]
    assert book.students() == ["O'Brien, Pat"]


def test_graded_matches_digest_rubric_version_and_cases(book):
    report = fake_report()
    book.record("alice", report)
    cd = cases_digest(report["cases"])
    assert book.graded("alice", "lesson1", "d" * 64, 1, cd)
    assert book.graded("alice", "lesson1", "d" * 64, 1)
    assert not book.graded("alice", "lesson1", "e" * 64, 1, cd)        # another submission
    assert not book.graded("alice", "lesson1", "d" * 64, 2, cd)        # another rubric
    assert not book.graded("alice", "lesson1", "d" * 64, 1, "other")   # another secret
    assert not book.graded("bob", "lesson1", "d" * 64, 1, cd)
    assert book.graded_keys("lesson1") == {("alice", "d" * 64, 1, cd, "0.1.0")}


def test_regrading_replaces_the_result(book):
    book.record("alice", fake_report(got=(0.0, 0.0)))
    book.record("alice", fake_report(digest="e" * 64, got=(2.0, 1.0)))
    [r] = book.results()
    assert r.score == 3.0 and r.submission_digest == "e" * 64
    with book.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(scores)).scalar() == 2


def test_a_failed_write_leaves_nothing(book):
    book.record("alice", fake_report())
    bad = fake_report(digest="e" * 64)
    bad["criteria"].append(dict(bad["criteria"][0]))     # a duplicate criterion row fails the insert
    with pytest.raises(sa.exc.IntegrityError):
        book.record("alice", bad)
    [r] = book.results()                                  # the earlier result, whole
    assert r.submission_digest == "d" * 64 and len(r.scores) == 2
    with book.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(results)).scalar() == 1


def test_errors_are_recorded_but_not_graded(book):
    info = LessonInfo("lesson1", "The request contract", 1, 10.0, ())
    book.record_error("bob", info, "bob.py", "is a binary file")
    [r] = book.results()
    assert r.status == "error" and r.score == 0 and r.error == "is a binary file" and r.scores == ()
    assert not book.graded("bob", "lesson1", "", 1)
    book.record("bob", fake_report())                    # then a good submission replaces it
    assert [r.status for r in book.results()] == ["graded"]


def test_a_newer_rubric_renames_criteria_and_keeps_dropped_ones_last(book):
    book.record("alice", fake_report())
    newer = fake_report(rubric_version=2)
    newer["criteria"] = newer["criteria"][1:]
    newer["criteria"][0]["title"] = "renamed"
    book.record("bob", newer)
    [info] = book.lessons()
    assert info.rubric_version == 2
    assert [(c.id, c.title) for c in info.criteria] == [("c1", "renamed"), ("c0", "criterion 0")]


def _writer(url, worker, n):
    with open_gradebook(url) as b:
        for i in range(n):
            b.record(f"s{worker}-{i}", fake_report(digest=f"{worker:02d}{i:062d}"))
            b.record("shared", fake_report(digest=f"{worker:02d}{i:062d}"))


def test_several_processes_write_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'gb.db'}"
    open_gradebook(url).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(url, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with open_gradebook(url) as b:
        students = [r.student for r in b.results()]
        assert len(students) == len(set(students)) == 4 * 15 + 1
        assert all(len(r.scores) == 2 for r in b.results())


def test_plain_paths_and_bad_urls(tmp_path):
    with open_gradebook(str(tmp_path / "sub" / ".." / "x.db")) as b:
        assert b.url.startswith("sqlite:///") and b.results() == []
    with pytest.raises(InputError, match="not a usable database URL"):
        open_gradebook("nosuchdialect://x/y")
    with pytest.raises(InputError, match="the folder .*/missing/dir does not exist"):
        open_gradebook(f"sqlite:///{tmp_path}/missing/dir/x.db")
    with pytest.raises(InputError, match="no gradebook here"):
        open_gradebook(str(tmp_path / "typo.db"), create=False)
    assert not (tmp_path / "typo.db").exists()


def test_a_rubric_rolled_back_is_the_one_the_lesson_totals_follow(book):
    """Graded under version 2 (one criterion worth 3), then under version 1 again: the
    lesson's total and criteria are version 1's, as its results are."""
    newer = fake_report(rubric_version=2, points=(3.0, 1.0), got=(3.0, 1.0))
    book.record("alice", newer)
    book.record("alice", fake_report())
    [info] = book.lessons()
    assert (info.rubric_version, info.max_score) == (1, 3.0)
    assert [(c.id, c.max_score) for c in info.criteria] == [("c0", 2.0), ("c1", 1.0)]


def _info(version=1, points=(2.0, 1.0), ids=("c0", "c1")):
    from grader.instructor.gradebook import CriterionInfo
    return LessonInfo("lesson1", "T", version, sum(points),
                      tuple(CriterionInfo(i, i, p, "both") for i, p in zip(ids, points)))


def test_a_rubric_changed_under_the_same_version_is_a_conflict_another_version_is_not(book):
    assert book.rubric_conflict(_info()) == ""                     # nothing graded yet
    book.record("alice", fake_report())                            # c0 2, c1 1, version 1
    assert book.rubric_conflict(_info()) == ""
    assert book.rubric_conflict(_info(points=(3.0, 1.0))) == "c0 2 -> 3 points; total 3 -> 4"
    assert book.rubric_conflict(_info(points=(2.0, 1.0, 1.0), ids=("c0", "c1", "c2"))) == \
        "c2 is new; total 3 -> 4"
    assert book.rubric_conflict(_info(points=(2.0,), ids=("c0",))) == "total 3 -> 2"
    assert book.rubric_conflict(_info(version=2, points=(3.0, 1.0))) == ""


def test_a_new_sqlite_gradebook_is_private_to_its_owner(tmp_path):
    """It holds every hidden case's feedback (as the Gradescope zip holds the secret: 0600)."""
    import os
    import stat
    path = tmp_path / "class.db"
    with open_gradebook(str(path)) as b:
        b.record("alice", fake_report())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open_gradebook(str(path)) as b:                   # and it reads back
        assert [r.student for r in b.results()] == ["alice"]


def test_a_grade_refused_before_its_first_result_leaves_no_gradebook_it_made(tmp_path):
    path = tmp_path / "class.db"
    with pytest.raises(InputError, match="refused"):
        with open_gradebook(str(path)):
            raise InputError("class", "refused")
    assert sorted(tmp_path.iterdir()) == []
    with open_gradebook(str(path)):       # opened and closed without a fault: it stays
        pass
    assert path.is_file()
    path.unlink()
    # Once a result is in it, the file stays whatever ends the run.
    with pytest.raises(KeyboardInterrupt):
        with open_gradebook(str(path)) as b:
            b.record("alice", fake_report())
            raise KeyboardInterrupt
    with open_gradebook(str(path), create=False) as b:
        assert [r.student for r in b.results()] == ["alice"]
    # And a gradebook that was there before the open stays, results and all.
    before = path.read_bytes()
    with pytest.raises(InputError):
        with open_gradebook(str(path)):
            raise InputError("class", "refused")
    assert path.read_bytes() == before


def test_a_refusal_after_someone_removed_the_new_gradebook_is_still_that_refusal(tmp_path):
    """The file the open made was deleted meanwhile (by hand, by a cleaning script): the
    clean-up makes no new one by looking into it, and the run ends with its own error."""
    path = tmp_path / "class.db"
    for idle in (False, True):          # a connection still open to the deleted file, or none
        with pytest.raises(InputError, match="refused"):
            with open_gradebook(str(path)) as b:
                path.unlink()
                if idle:
                    b.engine.dispose()
                raise InputError("class", "refused")
        assert not path.exists()


def test_a_new_gradebook_that_cannot_be_read_at_the_refusal_is_kept(tmp_path):
    """Not known to be empty is kept: the file became something else meanwhile (here,
    bytes that are no database), and the run still ends with its own error."""
    path = tmp_path / "class.db"
    with pytest.raises(InputError, match="refused"):
        with open_gradebook(str(path)) as b:
            b.engine.dispose()
            path.write_bytes(b"not a database, " * 64)
            raise InputError("class", "refused")
    assert path.read_bytes() == b"not a database, " * 64


def test_a_refusal_never_removes_a_new_gradebook_another_grade_is_using(tmp_path):
    """Several grades may write into one gradebook: one refused at its start leaves the file
    it made to the other, whether that one has a result in it yet or not."""
    path = tmp_path / "class.db"
    with pytest.raises(InputError):
        with open_gradebook(str(path)):
            other = open_gradebook(str(path))       # the second grade, still grading
            raise InputError("class", "refused")
    with other:
        other.record("alice", fake_report())
    with pytest.raises(InputError):
        with open_gradebook(str(tmp_path / "again.db")):
            with open_gradebook(str(tmp_path / "again.db")) as done:   # finished already
                done.record("bob", fake_report())
            raise InputError("class", "refused")
    for where, student in ((path, "alice"), (tmp_path / "again.db", "bob")):
        with open_gradebook(str(where), create=False) as b:
            assert [r.student for r in b.results()] == [student]


def test_a_gradebook_that_cannot_be_set_up_leaves_no_file_it_made(tmp_path, monkeypatch):
    from grader.instructor.gradebook import Gradebook

    def fails(self, create):
        raise InputError(self.shown_url, "cannot make the tables")
    monkeypatch.setattr(Gradebook, "_create_schema", fails)
    with pytest.raises(InputError, match="cannot make the tables"):
        open_gradebook(str(tmp_path / "class.db"))
    assert sorted(tmp_path.iterdir()) == []


@pytest.mark.parametrize("create", [True, False], ids=["grade", "export"])
def test_another_applications_database_is_refused_and_left_as_it_was(tmp_path, create):
    """nbgrader's own gradebook.db given as --gradebook by mistake: neither grade nor a
    reader adds the grader's tables to it, and the error names the tables it holds."""
    path = tmp_path / "gradebook.db"
    with sa.create_engine(f"sqlite:///{path}").begin() as conn:
        conn.execute(sa.text("CREATE TABLE student (id TEXT)"))
        conn.execute(sa.text("CREATE TABLE assignment (id TEXT)"))
    with pytest.raises(InputError, match=r"not a gradebook of this grader: it holds other tables "
                                         r"\(assignment, student\)"):
        open_gradebook(str(path), create=create)
    assert sa.inspect(sa.create_engine(f"sqlite:///{path}")).get_table_names() == ["assignment", "student"]


def test_a_reader_finds_no_gradebook_in_an_empty_database_and_makes_none(tmp_path):
    path = tmp_path / "empty.db"
    path.write_bytes(b"")                   # an empty file is an empty SQLite database
    with pytest.raises(InputError, match="no gradebook here"):
        open_gradebook(str(path), create=False)
    assert sa.inspect(sa.create_engine(f"sqlite:///{path}")).get_table_names() == []
    with open_gradebook(str(path), create=True) as b:      # grade may make it one
        assert b.results() == []
    with pytest.raises(InputError, match="no results in this gradebook yet"):
        open_gradebook(str(path), create=False)            # but holding no one, it is no class yet
    with open_gradebook(str(path), create=True) as b:
        b.record("alice", fake_report())
    with open_gradebook(str(path), create=False) as b:     # and once it holds a result, it is read
        assert [r.student for r in b.results()] == ["alice"]


@pytest.mark.parametrize("stored", ["{cut off", "[1, 2]"], ids=["not-json", "not-an-object"])
def test_a_damaged_stored_report_is_one_line_naming_the_student(tmp_path, capsys, stored):
    """A report edited by hand or cut off: `grader report` crashed with a JSONDecodeError."""
    from grader.cli import main
    db = tmp_path / "gb.db"
    with open_gradebook(str(db)) as book:
        book.record("alice", fake_report())
        with book.engine.begin() as conn:
            conn.execute(results.update().values(report=stored))
        with pytest.raises(InputError, match=r"^gradebook result of 'alice' for lesson1: its stored "
                                             r"report is not a JSON object"):
            book.results()[0].report
    code = main(["report", "lesson1", "--gradebook", str(db), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "gradebook result of 'alice' for lesson1" in err, err


@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(criteria=5), "criteria"),
    (lambda r: r["criteria"].__setitem__(1, "c1"), "criteria[1]"),
    (lambda r: r["criteria"][0].__setitem__("evidence", [{"case": 1}]), "criteria[0]"),
    (lambda r: r["criteria"][0].__setitem__("public_feedback", 7), "criteria[0]"),
    (lambda r: r.update(cases={"a": 1}), "cases"),
    (lambda r: r["cases"][0].pop("name"), "cases[0]"),
], ids=["criteria-a-number", "a-criterion-a-string", "evidence-not-text", "public-feedback-a-number",
        "cases-a-mapping", "a-case-without-its-name"])
@pytest.mark.parametrize("command", [["report", "lesson1", "--json"], ["feedback", "--public-only"]])
def test_a_stored_report_of_the_wrong_shape_is_one_line_naming_the_student_and_field(tmp_path, capsys,
                                                                                   change, field, command):
    """Valid JSON, edited by hand into another shape: the class report and the feedback
    pages stopped with a TypeError traceback."""
    from grader.cli import main
    db = tmp_path / "gb.db"
    report = json.loads(json.dumps(fake_report()))      # its own copy: fake_report shares its cases
    report["criteria"][0]["evidence"] = ["m"]
    change(report)
    with open_gradebook(str(db)) as book:
        book.record("bob", fake_report())
        book.record("alice", fake_report())
        with book.engine.begin() as conn:
            conn.execute(results.update().where(results.c.student == "alice").values(report=json.dumps(report)))
    out = ["--out", str(tmp_path / "out")] if command[0] == "feedback" else []
    code = main([*command, "--gradebook", str(db), *out])
    printed, err = capsys.readouterr()
    assert code == 2, err
    nothing_but_the_error(printed, err, command)
    assert err == (f"grader: gradebook result of 'alice' for lesson1: its stored report's {field} is not "
                   "what a report holds (damaged?); grade it again: grader grade lesson1 ... --force\n")


@pytest.mark.parametrize("table, column, typed, said", [
    (results, "score", "8,5", "its score is '8,5', not a number"),
    (results, "rubric_version", "two", "its rubric_version is 'two', not a whole number"),
    (results, "graded_at", "yesterday", "its graded_at is 'yesterday', not a time (YYYY-MM-DD HH:MM:SS)"),
    (results, "status", "Graded", "its status is 'Graded', not graded or error"),
    (scores, "score", "n/a", "its criterion c0's score is 'n/a', not a number"),
    (scores, "passed", "yes", "its criterion c0's passed is 'yes', not true or false"),
], ids=["score-with-a-comma", "version-a-word", "date-a-word", "status-capitalised",
        "criterion-score-a-word", "passed-a-word"])
@pytest.mark.parametrize("command", [["export", "--format", "csv"], ["report", "lesson1", "--json"],
                                     ["feedback"]])
def test_a_value_typed_by_hand_into_the_gradebook_is_one_line_naming_the_student_and_field(
        tmp_path, capsys, table, column, typed, said, command):
    """A SQLite gradebook keeps whatever a database viewer is given, in any column (a score
    mended by hand as "8,5"): export, report and feedback stopped with a TypeError or a
    ValueError traceback (exit 1), naming neither the student nor the field."""
    from grader.cli import main
    db = tmp_path / "gb.db"
    with open_gradebook(str(db)) as book:
        book.record("bob", fake_report())
        book.record("alice", fake_report())
        key = results.c.id if table is results else scores.c.result_id
        with book.engine.begin() as conn:
            alice = conn.execute(sa.select(results.c.id).where(results.c.student == "alice")).scalar()
            where = [key == alice] + ([scores.c.criterion == "c0"] if table is scores else [])
            conn.execute(table.update().where(*where).values({column: sa.literal_column(f"'{typed}'")}))
    out = ["--out", str(tmp_path / "out")] if command[0] == "feedback" else []
    code = main([*command, "--gradebook", str(db), *out])
    printed, err = capsys.readouterr()
    assert code == 2, err
    nothing_but_the_error(printed, err, command)
    assert err == (f"grader: gradebook result of 'alice' for lesson1: {said} (edited by hand?): mend it, "
                   f"or grade it again: grader grade lesson1 ... --force\n"), err


@pytest.mark.parametrize("table, column, typed, said", [
    (lessons, "max_score", "ten", "gradebook lesson 'lesson1': its max_score is 'ten', not a number"),
    (criteria, "max_score", "two", "gradebook criterion 'c0' of lesson1: its max_score is 'two', not a number"),
    (criteria, "position", "first", "gradebook criterion 'c0' of lesson1: its position is 'first', not a whole number"),
], ids=["lesson-total-a-word", "criterion-points-a-word", "criterion-position-a-word"])
@pytest.mark.parametrize("command", [["export", "--format", "csv"], ["report", "lesson1", "--json"]])
def test_a_lesson_typed_by_hand_into_the_gradebook_is_one_line_naming_it_and_the_field(
        tmp_path, capsys, table, column, typed, said, command):
    """A lesson's total or a criterion's points typed by hand as text: the class report and
    grade stopped with a TypeError or ValueError traceback."""
    from grader.cli import main
    db = tmp_path / "gb.db"
    with open_gradebook(str(db)) as book:
        book.record("alice", fake_report())
        where = [criteria.c.id == "c0"] if table is criteria else []
        with book.engine.begin() as conn:
            conn.execute(table.update().where(*where).values({column: sa.literal_column(f"'{typed}'")}))
    code = main([*command, "--gradebook", str(db)])
    printed, err = capsys.readouterr()
    assert code == 2, err
    nothing_but_the_error(printed, err, command)
    assert err == f"grader: {said} (edited by hand?): mend it\n", err


@pytest.mark.parametrize("command", [["export", "--format", "csv"], ["feedback"]])
def test_a_result_whose_lesson_was_removed_by_hand_is_one_line_naming_it(tmp_path, capsys, command):
    """A lesson's row deleted in a database viewer that does not enforce foreign keys (the
    sqlite3 shell's default) while its results stay: the CSV listed
    every student with no column of that lesson (its scores gone from the file, exit 0),
    and feedback stopped with a KeyError traceback. One line naming the result instead,
    and grade --force, which writes the row again, mends it."""
    from grader.cli import main
    db = tmp_path / "gb.db"
    import sqlite3
    with open_gradebook(str(db)) as book:
        for lesson in ("lesson1", "lesson2"):
            book.record("alice", fake_report(lesson=lesson))
    viewer = sqlite3.connect(db)            # as the sqlite3 shell: foreign keys not enforced
    with viewer:
        viewer.execute("DELETE FROM lessons WHERE id = 'lesson2'")
    viewer.close()
    out = ["--out", str(tmp_path / "out")] if command[0] == "feedback" else []
    code = main([*command, "--gradebook", str(db), *out])
    printed, err = capsys.readouterr()
    assert code == 2, err
    nothing_but_the_error(printed, err, command)
    assert err == ("grader: gradebook result of 'alice' for lesson2: its lesson is not among the "
                   "gradebook's lessons (lesson1; edited by hand?): grade it again: grader grade lesson2 "
                   "... --force\n"), err
    with open_gradebook(str(db)) as book:
        book.record("alice", fake_report(lesson="lesson2"))            # what grade --force does
        assert [(r.student, r.lesson) for r in book.results()] == [("alice", "lesson1"), ("alice", "lesson2")]


# ---- forgetting a student graded by mistake -------------------------------------------------------

def _class_with_a_stray(path):
    """alice and bob graded on two lessons, and "notes" (a folder graded by mistake) on one,
    as an error row and as a graded one."""
    with open_gradebook(str(path)) as b:
        for student, got in (("alice", (2.0, 1.0)), ("bob", (1.0, 0.0))):
            b.record(student, fake_report(got=got))
            b.record(student, fake_report(lesson="lesson2", got=got))
        b.record("notes", fake_report(got=(0.0, 0.0)))
        b.record_error("Zoë", LessonInfo("lesson3", "Prefill chunking", 1, 5.0, ()),
                       "Zoë/lesson3", "no submission for lesson3")
        return {(r.student, r.lesson): (r.score, r.submission_digest, r.report_json)
                for r in b.results()}


def _row_counts(book) -> dict[str, int]:
    from grader.instructor.gradebook import criteria, lessons, students
    with book.engine.connect() as conn:
        return {t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar()
                for t in (students, lessons, criteria, results, scores)}


def test_forget_removes_the_students_results_and_leaves_everyone_else_as_they_were(tmp_path):
    before = _class_with_a_stray(tmp_path / "gb.db")
    with open_gradebook(str(tmp_path / "gb.db")) as b:
        gone = b.forget("notes")
        assert gone.removed and gone.student == "notes"
        assert [(r.lesson, r.score) for r in gone.results] == [("lesson1", 0.0)]
        after = {(r.student, r.lesson): (r.score, r.submission_digest, r.report_json) for r in b.results()}
        assert after == {k: v for k, v in before.items() if k[0] != "notes"}
        assert b.students() == ["Zoë", "alice", "bob"]
        # Its criterion rows went with it: 2 students x 2 lessons x 2 criteria are left.
        counts = _row_counts(b)
        assert counts["scores"] == 8 and counts["results"] == 5 and counts["students"] == 3
        # A decomposed spelling is the same student, as in a class folder; the last result
        # of a lesson takes the lesson with it.
        b.forget("Zo\u0065\u0308")
        assert b.students() == ["alice", "bob"] and [l.id for l in b.lessons()] == ["lesson1", "lesson2"]


def test_forget_one_lesson_keeps_the_students_other_lessons(tmp_path):
    _class_with_a_stray(tmp_path / "gb.db")
    with open_gradebook(str(tmp_path / "gb.db")) as b:
        gone = b.forget("bob", "lesson2")
        assert [r.lesson for r in gone.results] == ["lesson2"]
        assert [(r.student, r.lesson) for r in b.results(student="bob")] == [("bob", "lesson1")]
        assert "bob" in b.students() and [r.student for r in b.results("lesson2")] == ["alice"]


def test_a_dry_run_names_what_it_would_remove_and_removes_nothing(tmp_path):
    before = _class_with_a_stray(tmp_path / "gb.db")
    with open_gradebook(str(tmp_path / "gb.db")) as b:
        counts = _row_counts(b)
        plan = b.forget("alice", dry_run=True)
        assert not plan.removed and [r.lesson for r in plan.results] == ["lesson1", "lesson2"]
        assert _row_counts(b) == counts and len(b.results()) == len(before)
        text = plan.render()
        assert text.startswith("would forget (--dry-run: nothing removed) 'alice' in sqlite:///")
        assert "  lesson1: graded, 3 / 3, alice.py" in text and "  lesson2: graded, 3 / 3" in text


@pytest.mark.parametrize("student, lesson, says", [
    ("alcie", None, r"no student 'alcie' in this gradebook \(4 students: Zoë, alice, bob, notes\); "
                    r"did you mean 'alice'\?; nothing removed"),
    ("nobody", None, r"no student 'nobody' in this gradebook \(4 students: .*\); nothing removed$"),
    ("notes", "lesson2", r"'notes' has no result for lesson2 \(theirs: lesson1\); nothing removed"),
])
def test_an_unknown_student_or_lesson_is_refused_naming_the_gradebook(tmp_path, student, lesson, says):
    path = tmp_path / "gb.db"
    _class_with_a_stray(path)
    with open_gradebook(str(path)) as b:
        counts = _row_counts(b)
        with pytest.raises(InputError, match=says) as e:
            b.forget(student, lesson)
        assert e.value.where == f"sqlite:///{path.resolve()}"
        assert _row_counts(b) == counts


def test_grader_gradebook_forget_removes_the_row_from_exports_and_the_report(tmp_path, capsys):
    """Through the command line: it names what it removed, asks nothing, and afterwards the
    CSV export and the class report have no row of the stray, and everyone else's as before."""
    import csv
    import io
    from grader.cli import main
    from grader.instructor.class_report.numbers import class_numbers
    db = tmp_path / "gb.db"
    _class_with_a_stray(db)

    def export() -> dict[str, list[str]]:
        assert main(["export", "--gradebook", str(db), "--format", "csv"]) == 0
        rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
        return {row[0]: row for row in rows[1:]}

    before = export()
    assert main(["gradebook", "forget", "notes", "--gradebook", str(db), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would forget" in out and "notes" in out and export() == before
    assert main(["gradebook", "forget", "notes", "--gradebook", str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"forgot 'notes' in sqlite:///{db.resolve()}: 1 result\n  lesson1: graded, 0 / 3")
    after = export()
    assert set(after) == set(before) - {"notes"}
    assert all(after[s] == before[s] for s in after)
    with open_gradebook(str(db)) as b:
        numbers = class_numbers(b, "lesson1").to_dict()
    assert "notes" not in json.dumps(numbers) and numbers["students"] == 2, numbers
    # A second time, it is no longer there: one line naming the gradebook, exit 2.
    assert main(["gradebook", "forget", "notes", "--gradebook", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"grader: sqlite:///{db.resolve()}: no student 'notes'"), err


def _as_someone_who_may_only_read(task):
    """``task()`` run by someone who may read the gradebook but not write it: under root
    (as the suite runs), a child that has become nobody; otherwise this user, the file made
    read-only. Its return value (JSON) or its exception's text comes back."""
    import os
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                     # the child: never back into pytest
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            out = {"value": task()}
        except BaseException as e:                   # noqa: BLE001 - reported to the parent
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def test_a_gradebook_one_may_only_read_is_read_by_the_readers_and_refused_for_grading():
    """Another's gradebook, or one on a share: export, report and feedback only read it, so
    they read it; grade, which must write, is refused in words that say why."""
    import os
    import shutil
    import tempfile
    from grader.instructor.exports.csv import table
    folder = tempfile.mkdtemp(prefix="grader-read-only-")     # not under pytest's own 0700 folder
    try:
        os.chmod(folder, 0o1777)                     # like /tmp: anyone may put SQLite's -shm there
        path = os.path.join(folder, "gb.db")
        with open_gradebook(path) as b:
            b.record("alice", fake_report())
        os.chmod(path, 0o644 if os.geteuid() == 0 else 0o444)
        with open(path, "rb") as f:
            before = f.read()
        # Each open is a fresh engine: nothing the parent opened is reused by the child.
        def read():
            with open_gradebook(path, create=False, read_only=True) as b:
                return table(b)
        def write():
            with open_gradebook(path) as b:
                b.record("bob", fake_report())
        got = _as_someone_who_may_only_read(read)
        assert got == {"value": [["student", "lesson1 total", "lesson1/c0", "lesson1/c1", "notes"],
                                 [["alice", "2.5", "2", "0.5", ""]]]}, got
        def forget():
            with open_gradebook(path, create=False) as b:
                b.forget("alice")
        refused = _as_someone_who_may_only_read(write)["error"]
        assert refused.startswith(f"InputError: sqlite:///{path}: cannot open the gradebook: ")
        assert refused.endswith("you may read it but not write it: grade into a gradebook you may "
                                "write (export, report and feedback only read it)"), refused
        refused = _as_someone_who_may_only_read(forget)["error"]
        assert refused.startswith(f"GradebookWriteError: sqlite:///{path}: cannot forget 'alice': ")
        assert "you may read it but not write it" in refused, refused
        with open(path, "rb") as f:
            assert f.read() == before
    finally:
        shutil.rmtree(folder)


def test_a_reader_does_not_wait_for_a_grading_runs_write_lock(tmp_path):
    """A grade holds the write lock while it writes; export, report and feedback take none,
    so they read what is there rather than wait for it (and, were it held longer, fail)."""
    import sqlite3
    from conftest import run_grader
    path = tmp_path / "gb.db"
    with open_gradebook(str(path)) as b:
        b.record("alice", fake_report())
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")                # as a grading run's write does
    try:
        code, out, err = run_grader("export", "--format", "csv", "--gradebook", str(path))
        assert code == 0, err
        assert out.splitlines()[1] == '"alice","2.5","2","0.5",""'
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_gradebook_another_program_keeps_locked_is_refused_saying_so(tmp_path, monkeypatch):
    """A viewer left open in a transaction, or another grade: after waiting its while,
    one line that says what holds it, not SQLite's bare "database is locked"."""
    import sqlite3
    import grader.instructor.gradebook as gradebook
    path = tmp_path / "gb.db"
    with open_gradebook(str(path)) as b:
        b.record("alice", fake_report())
    monkeypatch.setattr(gradebook, "SQLITE_BUSY_TIMEOUT_MS", 200)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(InputError) as refused:
            open_gradebook(str(path))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert refused.value.message == ("cannot open the gradebook: database is locked; another program "
                                     "has held its write lock for 0.2 s (a grade still running, a "
                                     "database viewer left open): wait for it or close it, then run "
                                     "this again")


@pytest.mark.parametrize("create", [True, False], ids=["grade", "reader"])
def test_a_gradebook_path_that_is_a_folder_or_a_pipe_is_refused_naming_it(tmp_path, create):
    """A folder was SQLite's "unable to open database file", and a named pipe a wait for
    ever, for a writer that never comes."""
    import os
    folder = tmp_path / "grades.db"
    folder.mkdir()
    pipe = tmp_path / "pipe.db"
    os.mkfifo(pipe)
    for path, kind in ((folder, "a folder"), (pipe, "not a regular file (a pipe, a device or a socket)")):
        for given in (str(path), f"sqlite:///{path}"):
            with pytest.raises(InputError) as refused:
                open_gradebook(given, create=create, read_only=not create)
            assert (refused.value.where, refused.value.message) == (
                str(path), f"is {kind}, not a gradebook: give the gradebook's file")


def test_a_gradebook_in_a_folder_whose_name_has_a_question_mark_or_a_hash_is_that_file(tmp_path):
    """A path was made into a URL's text, where "?" begins the query and "#" the fragment:
    the gradebook of a course kept in "C# course" was made at ".../C", and read from there."""
    import shutil
    from conftest import ROOT, SECRET, run_grader
    root = tmp_path / "C# course?"
    for part in ("rubrics", "assignments"):
        shutil.copytree(ROOT / part, root / part)
    book = root / "gradebook.db"                               # the course's own, by default
    (tmp_path / "secret").write_bytes(SECRET)
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    code, out, err = run_grader("--course", str(root), "grade", "lesson1", str(tmp_path / "class"),
                                "--secret-file", str(tmp_path / "secret"), "--quiet", "--json")
    assert code == 0, err
    assert json.loads(out)["gradebook"] == f"sqlite:///{book}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["C# course?", "class", "secret"]
    with open_gradebook(str(book), create=False, read_only=True) as b:
        assert [(r.student, r.score) for r in b.results()] == [("alice", 10.0)]
    code, out, err = run_grader("--course", str(root), "export", "--format", "csv")
    assert code == 0 and out.splitlines()[1].startswith('"alice","10"'), err


@pytest.mark.parametrize("url, shown", [
    ("postgresql+psycopg://grader:s3cret@127.0.0.1:1/gradebook?connect_timeout=5",
     "postgresql+psycopg://grader:***@127.0.0.1:1/gradebook?connect_timeout=5"),
    # libpq takes the password as a query parameter too, which SQLAlchemy passes on
    ("postgresql+psycopg://grader@127.0.0.1:1/gradebook?password=s3cret&connect_timeout=5",
     "postgresql+psycopg://grader@127.0.0.1:1/gradebook?password=***&connect_timeout=5"),
    ("postgresql+psycopg://grader@127.0.0.1:1/gradebook?connect_timeout=5&sslmode=prefer&sslpassword=s3cret",
     "postgresql+psycopg://grader@127.0.0.1:1/gradebook?connect_timeout=5&sslmode=prefer&sslpassword=***"),
])
def test_a_password_in_the_url_is_masked_wherever_the_url_is_shown(url, shown, capsys):
    """The error line (and the summary, the --json summary and the class report, which name
    the gradebook by shown_url) masked user:password@ only: a password given as libpq's
    query parameter was printed as typed."""
    from grader.cli import main
    from grader.instructor.gradebook import shown_url
    assert shown_url(url) == shown
    assert main(["export", "--format", "csv", "--gradebook", url]) == 2      # nothing listens on port 1
    err = capsys.readouterr().err
    assert err.startswith(f"grader: {shown}: cannot open the gradebook: ") and "s3cret" not in err, err
