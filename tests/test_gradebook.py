"""The gradebook: one transaction per result, one result per student and lesson, safe with
several writers, and everything a grade needs to be traced."""
import multiprocessing

import pytest
import sqlalchemy as sa

from grader.engine.errors import InputError
from grader.instructor.gradebook import LessonInfo, cases_digest, open_gradebook, results, scores


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
    assert book.graded_keys("lesson1") == {("alice", "d" * 64, 1, cd)}


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
