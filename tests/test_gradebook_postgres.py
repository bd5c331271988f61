"""The gradebook on a real PostgreSQL server (a throwaway one, see postgres.py): a class
graded, resumed and exported exactly as with SQLite; several processes writing at once;
a bad URL is one line naming it, its password masked."""
import csv
import json
import multiprocessing
import sys
import threading

import pytest
import sqlalchemy as sa

from classroom import make_class
import conftest
from conftest import ROOT, SECRET, run_grader
from grader.instructor.gradebook import _PG_WRITE_LOCK, LessonInfo, open_gradebook, results, scores
from postgres import pg_server, pg_url  # noqa: F401  (fixtures)
from test_gradebook import fake_report

REF = ROOT / "reference" / "solutions" / "lesson1.py"


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("secret") / "course.secret"
    path.write_bytes(SECRET)
    return path


def stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "duration_s"}


# ---------------------------------------------------------------------------- a class

def test_a_class_grades_resumes_and_exports_as_with_sqlite(pg_url, tmp_path, secret_file):
    students = make_class(tmp_path / "class", "lesson1", 6, seed=8, slow=0)   # odd names included
    # A student folder name as long as a file name may be (PostgreSQL enforces lengths).
    long_name = "x" * 250
    (tmp_path / "class" / "submitted" / long_name / "lesson1").mkdir(parents=True)
    (tmp_path / "class" / "submitted" / long_name / "lesson1" / "exercise.py").write_text(REF.read_text())
    names = {s.name for s in students} | {long_name}
    sqlite_url = f"sqlite:///{tmp_path / 'gb.db'}"

    def grade(url):
        code, out, err = run_grader("grade", "lesson1", tmp_path / "class", "--secret-file",
                                    secret_file, "--gradebook", url, "--jobs", "2", "--json",
                                    "--quiet")
        assert code == 0, err
        return json.loads(out)

    first = grade(pg_url)
    assert (first["students"], first["graded"], first["skipped"], first["failed"]) == (7, 7, 0, [])
    again = grade(pg_url)                         # resumed: nothing new to grade
    assert (again["graded"], again["skipped"], again["failed"]) == (0, 7, [])
    assert grade(sqlite_url)["graded"] == 7

    exported = {}
    for url in (pg_url, sqlite_url):
        code, out, err = run_grader("export", "--gradebook", url, "--format", "csv")
        assert code == 0, err
        exported[url] = out
    rows = list(csv.DictReader(exported[pg_url].splitlines()))
    totals = {row["student"]: float(row["lesson1 total"]) for row in rows}
    assert set(totals) == names and totals[long_name] == 10
    lite_rows = csv.DictReader(exported[sqlite_url].splitlines())
    assert totals == {row["student"]: float(row["lesson1 total"]) for row in lite_rows}
    assert exported[pg_url] == exported[sqlite_url]        # every criterion cell too

    # The same results read back, in the same order: code point order, not the database's
    # (ICU English) collation, which puts "Zoë Ångström" after "student005".
    with open_gradebook(pg_url) as pg, open_gradebook(sqlite_url) as lite:
        assert [(r.student, stable(r.report)) for r in pg.results()] == \
               [(r.student, stable(r.report)) for r in lite.results()]
        assert pg.students() == lite.students() == sorted(names)
        assert all(r.graded_at.tzinfo is not None for r in pg.results())


# ---------------------------------------------------------------------------- several writers

WRITERS, ROUNDS = 6, 16


def _writer(url, worker, start):
    start.wait(60)                     # all at once, on a database without tables yet
    with open_gradebook(url) as book:
        for i in range(ROUNDS):
            got = (float(worker % 3), (worker + i) % 3 / 2)    # who wrote a row shows in it
            digest = f"{worker:02d}{i:062d}"
            book.record("shared", fake_report(digest=digest, got=got))
            book.record(f"own-{worker}-{i}", fake_report(digest=digest, got=got))
            book.record("shared", fake_report(digest=digest, got=got[::-1]))
            book.record(f"pair-{i % 3}", fake_report(lesson=f"lesson{1 + i % 2}", digest=digest,
                                                     got=got))
            if (worker + i) % 2:
                book.record("mixed", fake_report(digest=digest, got=got))
            else:
                book.record_error("mixed", LessonInfo("lesson1", "The request contract", 1, 3.0, ()),
                                  "mixed.py", f"writer {worker} round {i}: unreadable", digest)


def test_several_processes_write_at_once(pg_url):
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_writer, args=(pg_url, w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WRITERS      # no writer raised

    expected = ({(f"own-{w}-{i}", "lesson1") for w in range(WRITERS) for i in range(ROUNDS)}
                | {("shared", "lesson1"), ("mixed", "lesson1")}
                | {(f"pair-{i % 3}", f"lesson{1 + i % 2}") for i in range(ROUNDS)})
    with open_gradebook(pg_url) as book:
        stored = book.results()
        with book.engine.connect() as conn:
            n_results = conn.execute(sa.select(sa.func.count()).select_from(results)).scalar()
            n_scores = conn.execute(sa.select(sa.func.count()).select_from(scores)).scalar()
    keys = [(r.student, r.lesson) for r in stored]
    assert sorted(keys) == sorted(expected) and n_results == len(expected)   # one each
    for r in stored:
        if r.status == "error":
            assert r.student == "mixed" and r.scores == () and "unreadable" in r.error
            continue
        # Whole, and from one write: the criterion rows are those of the stored report.
        assert [(s.criterion, s.score) for s in r.scores] == \
               [(c["id"], c["score"]) for c in r.report["criteria"]]
        assert sum(s.score for s in r.scores) == pytest.approx(r.score)
        assert r.report["submission_digest"] == r.submission_digest
    assert n_scores == sum(len(r.scores) for r in stored)                  # no orphans


def test_a_write_waits_for_the_write_lock(pg_url):
    """Why several writers never clash: a write first takes the gradebook's write lock (as
    SQLite's BEGIN IMMEDIATE does), so while another session holds it, nothing is written."""
    lock = sa.text("SELECT pg_advisory_lock(:key)"), {"key": _PG_WRITE_LOCK}
    unlock = sa.text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_WRITE_LOCK}
    with open_gradebook(pg_url) as book, book.engine.connect() as other:
        other.execute(*lock)
        writer = threading.Thread(target=book.record, args=("alice", fake_report()))
        writer.start()
        writer.join(0.5)
        assert writer.is_alive() and book.results() == []
        other.execute(*unlock)
        writer.join(30)
        assert not writer.is_alive() and [r.student for r in book.results()] == ["alice"]


def test_text_with_nul_characters_is_stored(pg_url):
    """PostgreSQL text cannot hold NUL; a submission's exception message can, and ends up
    in feedback: stored as U+FFFD, while the JSON report keeps it exactly."""
    report = fake_report()
    report["criteria"][0]["feedback"] = "kv_bytes_per_token raised ValueError: nul\x00here"
    with open_gradebook(pg_url) as book:
        book.record("alice", report)
        book.record_error("bob", LessonInfo("lesson1", "The request contract", 1, 3.0, ()),
                          "bob.py", "the grader failed: \x00")
        alice, bob = book.results()
    assert alice.scores[0].feedback == "kv_bytes_per_token raised ValueError: nul\ufffdhere"
    assert alice.report == report
    assert bob.error == "the grader failed: \ufffd"


# ---------------------------------------------------------------------------- bad URLs

def refused(capsys, *args) -> str:
    return conftest.refused(capsys, *args, never=("s3cret",))


@pytest.mark.parametrize("case", ["server down", "no such database"])
def test_an_unusable_postgresql_url_is_one_line_naming_it(case, pg_server, tmp_path, capsys,
                                                          secret_file):
    if case == "server down":      # nothing listens on port 1
        url, why = "postgresql+psycopg://grader:s3cret@127.0.0.1:1/gradebook", "Connection refused"
    else:
        url = f"postgresql+psycopg://grader:s3cret@/no_such_db?host={pg_server.socket}"
        why = 'database "no_such_db" does not exist'
    shown = url.replace(":s3cret@", ":***@")
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "alice.py").write_text(REF.read_text())
    for command in (["grade", "lesson1", tmp_path / "class", "--secret-file", secret_file],
                    ["export", "--format", "csv"]):
        err = refused(capsys, *command, "--gradebook", url)
        assert f"grader: {shown}: cannot open the gradebook: " in err and why in err, err


def test_a_missing_driver_says_what_to_install(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    err = refused(capsys, "export", "--format", "csv",
                  "--gradebook", "postgresql+psycopg://grader:s3cret@db/gradebook")
    assert "postgresql+psycopg://grader:***@db/gradebook: not a usable database URL" in err
    assert "pip install 'serving-grader[postgres]'" in err


def test_forget_removes_a_student_as_on_sqlite(pg_url):
    from grader.engine.errors import InputError
    from test_gradebook import _row_counts
    with open_gradebook(pg_url) as book:
        for student in ("alice", "bob", "notes"):
            book.record(student, fake_report())
        counts = _row_counts(book)
        gone = book.forget("notes")
        assert [r.student for r in gone.results] == ["notes"]
        assert book.students() == ["alice", "bob"] and len(book.results()) == 2
        after = _row_counts(book)
        assert after["scores"] == counts["scores"] - 2 and after["students"] == 2
        with pytest.raises(InputError, match="no student 'notes' in this gradebook"):
            book.forget("notes")
