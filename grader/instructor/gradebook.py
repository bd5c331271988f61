"""The gradebook: every graded submission, its per-criterion scores and the exact report.

One SQLAlchemy code path for SQLite (the default: a file in the course folder) and any
other SQLAlchemy URL (PostgreSQL for a large course). A result and its criterion rows are
written in ONE transaction, so a grader killed at any moment (kill -9 included) leaves
either the whole result or nothing; a re-run grades only what is missing.

Several grading processes may write at once: SQLite runs in WAL mode and takes its write
lock at BEGIN (no lock upgrades, so no deadlocks between writers), with a generous busy
timeout; PostgreSQL gets the same one-writer-at-a-time rule from a transaction-scoped
advisory lock taken first in every write (a write is one small transaction, so this costs
nothing next to grading); elsewhere a clash on one student is retried. Orders (students,
results) are sorted in Python, so they do not depend on the database's collation.

    book = open_gradebook("sqlite:///course/gradebook.db")
    if not book.graded("alice", "lesson1", digest, rubric_version, cases_digest):
        book.record("alice", report.to_dict())
    for r in book.results("lesson1"): ...
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import time
import urllib.parse
import unicodedata
from dataclasses import dataclass
from difflib import get_close_matches
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError, OperationalError

from grader.engine.errors import InputError
from grader.engine.files import NOT_REGULAR, Unreadable, read_regular
from grader.engine.layout import did_you_mean
from grader.engine.text import first_few, plural, terminal

SCHEMA_VERSION = 1
DEFAULT_FILE = "gradebook.db"
CONNECT_TIMEOUT_S = 10         # PostgreSQL: an unreachable server is an error, not a hang
SQLITE_BUSY_TIMEOUT_MS = 60_000   # SQLite: how long a write waits for another writer's lock
# pg_advisory_xact_lock's key for "one gradebook writer at a time": any fixed 64-bit number;
# this one is derived from a name so it is unlikely to be another application's.
_PG_WRITE_LOCK = int.from_bytes(hashlib.sha256(b"serving-grader gradebook writes").digest()[:8],
                                "big", signed=True)

_meta = sa.MetaData()

schema_info = sa.Table(
    "grader_schema", _meta,
    sa.Column("version", sa.Integer, primary_key=True))

students = sa.Table(
    "students", _meta,
    # The folder or file name: unbounded, since a file name may reach 255 bytes and
    # PostgreSQL, unlike SQLite, enforces a declared length.
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("added_at", sa.DateTime(timezone=True), nullable=False))

lessons = sa.Table(
    "lessons", _meta,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("rubric_version", sa.Integer, nullable=False),
    sa.Column("max_score", sa.Float, nullable=False))

criteria = sa.Table(
    "criteria", _meta,
    sa.Column("lesson", sa.String(64), sa.ForeignKey("lessons.id"), primary_key=True),
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),         # the rubric's order
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("max_score", sa.Float, nullable=False),
    sa.Column("visibility", sa.String(16), nullable=False))    # public | hidden | both

results = sa.Table(
    "results", _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("student", sa.Text, sa.ForeignKey("students.id"), nullable=False),
    sa.Column("lesson", sa.String(64), sa.ForeignKey("lessons.id"), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),         # graded | error
    sa.Column("score", sa.Float, nullable=False),
    sa.Column("max_score", sa.Float, nullable=False),
    sa.Column("submission_path", sa.Text, nullable=False),
    sa.Column("submission_digest", sa.String(64), nullable=False),   # sha256 of the bytes graded
    sa.Column("rubric_version", sa.Integer, nullable=False),
    sa.Column("cases_digest", sa.String(64), nullable=False),        # which cases (secret) graded it
    sa.Column("grader_version", sa.String(32), nullable=False),
    sa.Column("graded_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("duration_s", sa.Float, nullable=False),
    sa.Column("error", sa.Text, nullable=False),                      # why it could not be graded
    sa.Column("report", sa.Text, nullable=False),                     # the full JSON report
    sa.UniqueConstraint("student", "lesson", name="one_result_per_student_and_lesson"))

scores = sa.Table(
    "scores", _meta,
    sa.Column("result_id", sa.Integer, sa.ForeignKey("results.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("criterion", sa.String(128), primary_key=True),
    sa.Column("score", sa.Float, nullable=False),
    sa.Column("max_score", sa.Float, nullable=False),
    sa.Column("passed", sa.Boolean, nullable=False),
    sa.Column("feedback", sa.Text, nullable=False))


@dataclass(frozen=True)
class CriterionInfo:
    id: str
    title: str
    max_score: float
    visibility: str


@dataclass(frozen=True)
class LessonInfo:
    id: str
    title: str
    rubric_version: int
    max_score: float
    criteria: tuple[CriterionInfo, ...]


@dataclass(frozen=True)
class CriterionScore:
    criterion: str
    score: float
    max_score: float
    passed: bool
    feedback: str


@dataclass(frozen=True)
class StoredResult:
    student: str
    lesson: str
    status: str                      # graded | error
    score: float
    max_score: float
    submission_path: str
    submission_digest: str
    rubric_version: int
    cases_digest: str
    grader_version: str
    graded_at: datetime
    duration_s: float
    error: str
    scores: tuple[CriterionScore, ...]
    report_json: str

    @property
    def report(self) -> dict:
        """The full JSON report. One the gradebook holds damaged (edited by hand, cut off by a
        full disk) is one line naming the student and lesson, for every command that reads
        it, not a JSONDecodeError from deep inside the class report."""
        if not self.report_json:
            return {}
        try:
            report = json.loads(self.report_json)
        except ValueError as e:
            report = e
        where = f"gradebook result of {self.student!r} for {self.lesson}"
        again = f"grade it again: grader grade {self.lesson} ... --force"
        if not isinstance(report, dict):
            raise InputError(where, f"its stored report is not a JSON object (damaged?); {again}")
        field = _misshapen(report)
        if field:
            raise InputError(where, f"its stored report's {field} is not what a report holds "
                                    f"(damaged?); {again}")
        return report


def _misshapen(report: dict) -> str:
    """The first field of a stored report that the class report and the feedback pages read
    and could not (a list that is a number, a case without its name), or "": they would
    stop with a TypeError deep inside, rather than one line naming the result."""
    def text(value) -> bool:
        return isinstance(value, str)
    cases, criteria = report.get("cases", []), report.get("criteria", [])
    if not isinstance(cases, list):
        return "cases"
    for n, c in enumerate(cases):
        cite = "name" if isinstance(c, dict) and c.get("visibility") == "public" else "digest"
        if not (isinstance(c, dict) and text(c.get("visibility")) and text(c.get("family"))
                and text(c.get(cite))):
            return f"cases[{n}]"
    if not isinstance(criteria, list):
        return "criteria"
    for n, c in enumerate(criteria):
        if not (isinstance(c, dict) and text(c.get("id")) and text(c.get("feedback", ""))
                and isinstance(c.get("evidence", []), list) and all(map(text, c.get("evidence", [])))
                and text(c.get("public_feedback") or "")):
            return f"criteria[{n}]"
    return ""


@dataclass(frozen=True)
class Forgotten:
    """What ``Gradebook.forget`` removed (or, on a dry run, would remove): each result as it
    stood, so the instructor reads exactly what is gone."""
    gradebook: str                   # where (its password masked)
    student: str
    results: tuple[StoredResult, ...]
    removed: bool                    # False: a dry run, nothing changed

    def render(self) -> str:
        did = "forgot" if self.removed else "would forget (--dry-run: nothing removed)"
        lines = [f"{did} {self.student!r} in {self.gradebook}: {plural(len(self.results), 'result')}"]
        for r in self.results:
            why = f" ({r.error})" if r.status != "graded" else ""
            lines.append(f"  {r.lesson}: {r.status}, {r.score:g} / {r.max_score:g}, "
                         f"{r.submission_path}{why}")
        return terminal(lines)         # a student is named by their file: the learner's text


def cases_digest(cases: list[dict]) -> str:
    """Which cases graded a result (public by name, hidden by digest): a changed secret or
    public case set changes it, so such results count as not yet graded."""
    text = json.dumps(cases, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def default_gradebook(course_root: Path) -> str:
    """The course's own gradebook, as a path (a URL would misread a folder named "C#")."""
    return str(Path(course_root) / DEFAULT_FILE)


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything stored is UTC.
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def shown_url(url: str) -> str:
    """The URL as given, its passwords masked: user:password@ (read as SQLAlchemy reads it),
    and every query parameter that names one (``?password=``, ``&sslpassword=``), which
    SQLAlchemy hands to the driver as libpq takes it: shown as typed, it printed the
    password in every error line, summary and class report naming the gradebook."""
    url = re.sub(r"^([\w+]+://[^:/]*:)[^@]*@", r"\1***@", url)
    return re.sub(r"([?&][^=&#]*password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


def _one_line(error: BaseException) -> str:
    # Drivers' messages span lines (libpq adds a hint on its own line); a person gets one.
    return " ".join(str(error).split())


def _no_nul(value):
    # PostgreSQL text cannot hold NUL, and feedback may quote a submission's own exception
    # message, which can: such a character is stored as U+FFFD (the JSON report keeps it
    # exactly, escaped). SQLite stores it as it is.
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


def _sqlite_setup(engine: sa.Engine, read_only: bool) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None        # pysqlite must not issue BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_MS)}")
        if not read_only:                        # a reader reads the file as it is
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        # Take the write lock up front: two writers never both hold a read lock and then
        # wait for each other's upgrade. A reader takes none: it never waits for a writer.
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _read_only_sqlite(database: str) -> sa.URL:
    """SQLite's URI for the file opened read-only (its path escaped as a URI's)."""
    return sa.engine.URL.create("sqlite", database="file:" + urllib.parse.quote(database),
                                query={"mode": "ro", "uri": "true"})


def _sqlite_hint(database: str, why: str) -> str:
    """What the instructor can do about a SQLite gradebook that would not open, in words
    SQLite's own message ("unable to open database file") leaves out."""
    path = Path(database)
    if path.exists() and not os.access(path, os.R_OK):
        return "; you may not read it (ask its owner, or give a copy you may read)"
    if "unable to open" in why and path.exists() and not os.access(path.parent, os.W_OK):
        return (f"; SQLite writes its journal beside the gradebook, and the folder {path.parent} "
                "may not be written: copy the gradebook to a folder you may write")
    if "locked" in why:
        return (f"; another program has held its write lock for {SQLITE_BUSY_TIMEOUT_MS / 1000:g} s "
                "(a grade still running, a database viewer left open): wait for it or close it, "
                "then run this again")
    if "readonly" in why:
        return ("; you may read it but not write it: grade into a gradebook you may write "
                "(export, report and feedback only read it)")
    return ""


def _raw(table: sa.Table) -> sa.Select:
    """Every column of ``table`` as the database holds it, with none of SQLAlchemy's
    conversions: SQLite keeps whatever a database viewer was given in any column (a score
    typed as "8,5" stays text), and converted on the way out it failed deep inside a
    command (a TypeError adding up scores, a ValueError from a date), not naming the row."""
    return sa.select(*(sa.type_coerce(c, sa.types.NullType).label(c.name) for c in table.columns))


def _whose(student, lesson) -> str:
    return f"gradebook result of {student!r} for {lesson}"


def _stored(table: sa.Table, row, where: str, prefix: str = "", again: str | None = None) -> dict:
    """A row read by ``_raw``, each value checked against its column's type (and a result's
    status against the two it may be), as Python values; one that is not what its column
    holds is an InputError naming the row (``where``) and the field, and how to mend it:
    by hand, or (``again`` unset: a result) by grading it again. A lesson's row and its
    criteria's are mended by hand only: grade reads them before it grades."""
    values = {}
    for column in table.columns:
        value, kind = _as_column(column.type, row[column.name])
        if column.name == "status" and value not in ("graded", "error"):
            kind = "graded or error"
        if kind:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            if again is None:
                again = f", or grade it again: grader grade {row['lesson']} ... --force"
            raise InputError(where, f"its {prefix}{column.name} is {shown}, not {kind} (edited by "
                                    f"hand?): mend it{again}")
        values[column.name] = value
    return values


def _as_column(kind: sa.types.TypeEngine, value) -> tuple[object, str]:
    """(the value as Python holds it, "") or (the value, what it should have been)."""
    if isinstance(kind, sa.Boolean):
        return (bool(value), "") if value in (0, 1) else (value, "true or false")
    if isinstance(kind, sa.Integer):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return value, "" if ok else "a whole number"
    if isinstance(kind, sa.Float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return (float(value), "") if ok else (value, "a number")
    if isinstance(kind, sa.DateTime):
        when = value
        if isinstance(value, str):            # SQLite keeps a time as its ISO text
            with contextlib.suppress(ValueError):
                when = datetime.fromisoformat(value)
        return (_utc(when), "") if isinstance(when, datetime) else (value, "a time (YYYY-MM-DD HH:MM:SS)")
    return value, "" if isinstance(value, str) else "text"


# An error row of a submission the grader itself failed on starts with these words; what
# follows (the exception) is the instructor's to read: it may name their machine's paths.
GRADER_FAILED = "the grader failed on this submission"


def student_error(error: str) -> str:
    """A stored error as its student reads it: a grader failure without the grader's detail;
    any other reason (a missing or unreadable file) as it is, since it is theirs to fix."""
    if error.startswith(GRADER_FAILED):
        return f"{GRADER_FAILED}, not because of your code; your instructor has the details"
    return error


class Gradebook:
    def __init__(self, url: str, create: bool = True, read_only: bool = False,
                 location: sa.URL | None = None):
        """``read_only``: for a command that only reads it (export, report, feedback): a
        SQLite gradebook is opened read-only, so one the instructor may read but not
        write (another's, on a read-only share) reads as well as their own, and a reader
        never waits for a grading run's write lock nor adds a table. ``location``: the URL
        itself, when ``url`` is only how it is shown (a path's, which its text would misread)."""
        self.url = url
        self.shown_url = shown_url(url)
        self.read_only = read_only
        self.sqlite_file = ""
        self.made_here: Path | None = None    # the SQLite file this open made (open_gradebook)
        try:
            parsed = location if location is not None else sa.make_url(url)
            connect_args = {}
            if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
                connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
            if parsed.get_backend_name() == "sqlite":
                self.sqlite_file = parsed.database or ""
                if read_only:
                    parsed = _read_only_sqlite(self.sqlite_file)
            self.engine = sa.create_engine(parsed, connect_args=connect_args)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ValueError) as e:
            raise InputError(self.shown_url, f"not a usable database URL ({e})") from None
        except ImportError as e:
            hint = ("; install the PostgreSQL driver: pip install 'serving-grader[postgres]'"
                    if parsed.get_backend_name() == "postgresql" else "")
            raise InputError(self.shown_url, f"not a usable database URL ({e}{hint})") from None
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            _sqlite_setup(self.engine, read_only)
        self._create_schema(create and not read_only)

    # ------------------------------------------------------------------ setup

    def _connect(self):
        """A connection, or one line that says why there is none (naming the URL, its
        password masked: a server that is down, a wrong password, a missing database)."""
        try:
            return self.engine.connect()
        except sa.exc.DBAPIError as e:
            raise self._cannot_open(e) from None

    def _cannot_open(self, e: sa.exc.DBAPIError) -> InputError:
        why = _one_line(e.orig)
        hint = _sqlite_hint(self.sqlite_file, why) if self.sqlite_file else ""
        return InputError(self.shown_url, f"cannot open the gradebook: {why}{hint}")

    def _one_writer(self, conn) -> None:
        """Wait for the gradebook's write lock, held until this transaction ends. SQLite
        took its lock at BEGIN (BEGIN IMMEDIATE); PostgreSQL's is an advisory lock."""
        if self.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_WRITE_LOCK})

    def _create_schema(self, create: bool) -> None:
        for attempt in range(3):
            conn = self._connect()
            try:
                with conn, conn.begin():
                    if not self.read_only:
                        self._one_writer(conn)
                    self._refuse_another_database(conn, create)
                    if not self.read_only:
                        _meta.create_all(conn)
                    have = conn.execute(sa.select(schema_info.c.version)).scalar()
                    if have is None and not self.read_only:
                        conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
                    elif have != SCHEMA_VERSION:
                        raise InputError(self.shown_url, f"gradebook schema version {have}; this "
                                                         f"grader reads version {SCHEMA_VERSION}")
                    if create:
                        # A write that changes nothing: a gradebook that may be read but not
                        # written (another's file, a read-only share) is refused here, before
                        # any grade, not at the first result after minutes of grading.
                        conn.execute(schema_info.update().values(version=schema_info.c.version))
                    if not create and not _any_result(conn):
                        # Made by a grade that was refused (an empty or mistyped class folder,
                        # no readable file): a reader would export, report and write feedback
                        # for no one, and call it the class.
                        raise InputError(self.shown_url, "no results in this gradebook yet: grade "
                                                         "into it first (grader grade ... "
                                                         "--gradebook), or give the gradebook your "
                                                         "grades went to")
                return
            except (IntegrityError, sa.exc.ProgrammingError):
                if attempt == 2:        # another process created the same tables meanwhile
                    raise
            except sa.exc.DatabaseError as e:     # locked, read-only, not a database at all
                raise self._cannot_open(e) from None

    def _refuse_another_database(self, conn, create: bool) -> None:
        """A database without the grader's schema table is not a gradebook: one holding
        other tables is another application's (nbgrader's own gradebook.db given by
        mistake), and tables are never added to it; an empty one only grade may make into
        a gradebook, since a reader would see no one and report that as a class."""
        tables = sa.inspect(conn).get_table_names()
        if schema_info.name in tables:
            return
        if tables:
            shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
            raise InputError(self.shown_url, f"not a gradebook of this grader: it holds other tables "
                                             f"({shown}) and no {schema_info.name}; give the gradebook "
                                             "your grades went to")
        if not create:
            raise InputError(self.shown_url, "no gradebook here (an empty database): grade into it "
                                             "first (grader grade ... --gradebook), or give the "
                                             "gradebook your grades went to")

    def own_files(self) -> set[Path]:
        """The files on disk that are this gradebook (SQLite's, with the journal files it
        keeps beside it; none for a server's), as resolved paths."""
        if not self.sqlite_file:
            return set()
        main = Path(self.sqlite_file).resolve()
        return {main, *(main.with_name(main.name + side) for side in SQLITE_SIDE_FILES)}

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc):
        # Asked before the close: whether anyone's result (another grading process's too:
        # several may grade into one gradebook) is in the file this open made.
        # A file deleted by hand meanwhile is not looked for: a connection would make it anew.
        unmake = kind is not None and self.made_here is not None and self.made_here.exists() \
            and not self._holds_a_result()
        self.close()
        if unmake:
            self._unmake()

    def _holds_a_result(self) -> bool:
        try:
            with self.engine.connect() as conn:
                return _any_result(conn)
        except sa.exc.SQLAlchemyError:
            return True         # unreadable now: kept, as anything not known to be empty

    def _unmake(self) -> None:
        """Remove the SQLite file this open made, no result in it: a grade refused before its
        first result (an empty class, an unreachable scheduler) leaves no empty gradebook
        behind to be mistaken for one. Closed, SQLite has removed its write-ahead log and
        index, unless another process still has the gradebook open (a second grade into the
        same new file): then the file is that process's too, and stays."""
        made = self.made_here
        if any(Path(f"{made}{side}").exists() for side in ("-wal", "-shm")):
            return
        made.unlink(missing_ok=True)        # deleted in between: the refusal stands
        self.made_here = None

    # ------------------------------------------------------------------ writing

    def record(self, student: str, report: dict) -> None:
        """Store one graded report (its to_dict form) with its criteria, replacing any
        earlier result of this student for this lesson, all in one transaction."""
        criteria_rows = [dict(criterion=c["id"], score=float(c["score"]),
                              max_score=float(c["max_score"]), passed=bool(c["passed"]),
                              feedback=c["feedback"]) for c in report["criteria"]]
        row = dict(student=student, lesson=report["lesson"], status="graded",
                   score=float(report["score"]), max_score=float(report["max_score"]),
                   submission_path=report["submission"],
                   submission_digest=report["submission_digest"],
                   rubric_version=int(report["rubric_version"]),
                   cases_digest=cases_digest(report["cases"]),
                   grader_version=report["grader_version"], graded_at=_now(),
                   duration_s=float(report.get("duration_s", 0.0)), error="",
                   report=json.dumps(report, sort_keys=True))
        lesson = LessonInfo(report["lesson"], report["title"], int(report["rubric_version"]),
                            float(report["max_score"]),
                            tuple(CriterionInfo(c["id"], c["title"], float(c["max_score"]),
                                                c["visibility"]) for c in report["criteria"]))
        self._write(student, lesson, row, criteria_rows)

    def record_error(self, student: str, lesson: LessonInfo, path: str, error: str,
                     digest: str = "") -> None:
        """A submission that could not be graded (missing, unreadable): zero points and the
        reason, so exports list the student; a re-run tries it again."""
        row = dict(student=student, lesson=lesson.id, status="error", score=0.0,
                   max_score=lesson.max_score, submission_path=path, submission_digest=digest,
                   rubric_version=lesson.rubric_version, cases_digest="", grader_version="",
                   graded_at=_now(), duration_s=0.0, error=error, report="")
        self._write(student, lesson, row, [])

    def _write(self, student: str, lesson: LessonInfo, row: dict, criteria_rows: list[dict]):
        if self.dialect == "postgresql":
            row = {k: _no_nul(v) for k, v in row.items()}
            criteria_rows = [{k: _no_nul(v) for k, v in r.items()} for r in criteria_rows]
        for attempt in range(5):
            try:
                with self.engine.begin() as conn:
                    self._one_writer(conn)
                    self._ensure_student(conn, student)
                    self._ensure_lesson(conn, lesson)
                    conn.execute(results.delete().where(results.c.student == student,
                                                        results.c.lesson == lesson.id))
                    rid = conn.execute(results.insert().values(**row)).inserted_primary_key[0]
                    if criteria_rows:
                        conn.execute(scores.insert(), [dict(r, result_id=rid) for r in criteria_rows])
                return
            except IntegrityError:
                # Another process wrote the same student or lesson in between (not possible
                # under SQLite's or PostgreSQL's write lock; possible elsewhere): the retry
                # sees it.
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except (OperationalError, OSError) as e:
                # A full disk, a read-only or vanished file: this transaction rolled back,
                # every earlier one stands.
                raise self._write_failed(f"cannot write {student}'s result", e) from None

    def forget(self, student: str, lesson: str | None = None, *, dry_run: bool = False) -> Forgotten:
        """Remove a student's results (of ``lesson``, or of every lesson) in one transaction:
        a folder graded by mistake (``notes/``, a copy of the stub) is otherwise a student
        with 0 points in every export and report, for good. The student goes once no result
        of theirs is left, and a lesson once no one's is, so the gradebook reads as if they
        had never been graded. An unknown student (or lesson of theirs) is refused, naming
        this gradebook and who is in it: a typo must not report success."""
        student = unicodedata.normalize("NFC", student)     # as a class's discovery names them
        gone = tuple(self.results(lesson, student))
        if not gone:
            raise InputError(self.shown_url, self._not_here(student, lesson))
        if dry_run:
            return Forgotten(self.shown_url, student, gone, removed=False)
        try:
            with self.engine.begin() as conn:
                self._one_writer(conn)
                ids = sa.select(results.c.id).where(results.c.student == student)
                if lesson is not None:
                    ids = ids.where(results.c.lesson == lesson)
                ids = [r[0] for r in conn.execute(ids)]
                conn.execute(scores.delete().where(scores.c.result_id.in_(ids)))
                conn.execute(results.delete().where(results.c.id.in_(ids)))
                if conn.execute(sa.select(results.c.id).where(results.c.student == student)
                                .limit(1)).first() is None:
                    conn.execute(students.delete().where(students.c.id == student))
                for old in {r.lesson for r in gone}:
                    if conn.execute(sa.select(results.c.id).where(results.c.lesson == old)
                                    .limit(1)).first() is None:
                        conn.execute(criteria.delete().where(criteria.c.lesson == old))
                        conn.execute(lessons.delete().where(lessons.c.id == old))
        except (OperationalError, OSError) as e:
            raise self._write_failed(f"cannot forget {student!r}", e) from None
        return Forgotten(self.shown_url, student, gone, removed=True)

    def _write_failed(self, what: str, e: Exception) -> "GradebookWriteError":
        """A write that failed, in one line with what the instructor can do about it."""
        why = _one_line(getattr(e, "orig", None) or e)
        hint = _sqlite_hint(self.sqlite_file, why) if self.sqlite_file else ""
        return GradebookWriteError(self.shown_url, f"{what}: {why}{hint}")

    def _not_here(self, student: str, lesson: str | None) -> str:
        everyone = self.students()
        if student in everyone:
            theirs = sorted({r.lesson for r in self.results(student=student)})
            return f"{student!r} has no result for {lesson} (theirs: {', '.join(theirs)}); nothing removed"
        near = get_close_matches(student, everyone, n=3)
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        return (f"no student {student!r} in this gradebook ({plural(len(everyone), 'student')}: "
                f"{first_few(everyone) or 'none'}){hint}; nothing removed")

    @staticmethod
    def _ensure_student(conn, student: str) -> None:
        if conn.execute(sa.select(students.c.id).where(students.c.id == student)).first() is None:
            conn.execute(students.insert().values(id=student, added_at=_now()))

    @staticmethod
    def _ensure_lesson(conn, lesson: LessonInfo) -> None:
        """The lesson's row and criteria as the rubric that graded last has them: a rubric
        rolled back to an older version is the one in force, and the report, the exports
        and the feedback must total what its results were graded out of."""
        have = conn.execute(sa.select(lessons).where(lessons.c.id == lesson.id)).first()
        if have is not None and not lesson.criteria:
            return        # an error row knows only totals
        values = dict(title=lesson.title, rubric_version=lesson.rubric_version,
                      max_score=lesson.max_score)
        if have is None:
            conn.execute(lessons.insert().values(id=lesson.id, **values))
        elif (have.title, have.rubric_version, have.max_score) != tuple(values.values()):
            conn.execute(lessons.update().where(lessons.c.id == lesson.id).values(**values))
        if not lesson.criteria:
            return
        stored = {r.id: r for r in conn.execute(
            sa.select(criteria).where(criteria.c.lesson == lesson.id))}
        # Criteria a newer rubric dropped keep their rows (old results still cite them),
        # listed after the current ones.
        wanted = [(c.id, dict(position=pos, title=c.title, max_score=c.max_score,
                              visibility=c.visibility)) for pos, c in enumerate(lesson.criteria)]
        current = {cid for cid, _ in wanted}
        for n, cid in enumerate(sorted(set(stored) - current)):
            old = stored[cid]
            wanted.append((cid, dict(position=len(lesson.criteria) + n, title=old.title,
                                     max_score=old.max_score, visibility=old.visibility)))
        for cid, values in wanted:
            old = stored.get(cid)
            if old is None:
                conn.execute(criteria.insert().values(lesson=lesson.id, id=cid, **values))
            elif (old.position, old.title, old.max_score, old.visibility) != tuple(values.values()):
                conn.execute(criteria.update().where(criteria.c.lesson == lesson.id,
                                                     criteria.c.id == cid).values(**values))

    # ------------------------------------------------------------------ reading

    def graded(self, student: str, lesson: str, digest: str, rubric_version: int,
               cases: str | None = None) -> bool:
        """True when this exact submission is already graded under this rubric version
        (and, given ``cases``, on the same cases: the same secret)."""
        q = sa.select(results.c.id).where(
            results.c.student == student, results.c.lesson == lesson,
            results.c.status == "graded", results.c.submission_digest == digest,
            results.c.rubric_version == rubric_version)
        if cases is not None:
            q = q.where(results.c.cases_digest == cases)
        with self.engine.connect() as conn:
            return conn.execute(q).first() is not None

    def rubric_conflict(self, lesson: LessonInfo) -> str:
        """How a rubric about to grade differs from what the gradebook's results of the same
        version were graded with ("" when it does not, or the version is another): a
        version names one rubric, and results of two under one number could not be told
        apart. Points and criteria are what the gradebook keeps; a check's parameters
        changed alone are not seen."""
        have = next((l for l in self.lessons() if l.id == lesson.id), None)
        if have is None or have.rubric_version != lesson.rubric_version or not have.criteria:
            return ""
        theirs = {c.id: c.max_score for c in have.criteria}
        changes = [f"{c.id} {theirs[c.id]:g} -> {c.max_score:g} points" if c.id in theirs else f"{c.id} is new"
                   for c in lesson.criteria if theirs.get(c.id) != c.max_score]
        if have.max_score != lesson.max_score:
            changes.append(f"total {have.max_score:g} -> {lesson.max_score:g}")
        return "; ".join(changes)

    def graded_keys(self, lesson: str) -> set[tuple[str, str, int, str, str]]:
        """(student, digest, rubric_version, cases_digest, grader_version) of every graded
        result: one query for a whole class instead of one per student."""
        q = sa.select(results.c.student, results.c.submission_digest, results.c.rubric_version,
                      results.c.cases_digest, results.c.grader_version).where(
            results.c.lesson == lesson, results.c.status == "graded")
        with self.engine.connect() as conn:
            return {tuple(r) for r in conn.execute(q)}

    def students(self) -> list[str]:
        with self.engine.connect() as conn:
            return sorted(r[0] for r in conn.execute(sa.select(students.c.id)))

    def lessons(self) -> list[LessonInfo]:
        """Each lesson's totals and criteria, in the rubric's order; a value edited by hand
        into another type is one line naming the lesson (or criterion) and the field."""
        with self.engine.connect() as conn:
            rows = [_stored(criteria, r._mapping, f"gradebook criterion {r.id!r} of {r.lesson}",
                            again="") for r in conn.execute(_raw(criteria))]
            crit: dict[str, list[CriterionInfo]] = {}
            for r in sorted(rows, key=lambda r: (r["lesson"], r["position"])):
                crit.setdefault(r["lesson"], []).append(
                    CriterionInfo(r["id"], r["title"], r["max_score"], r["visibility"]))
            infos = [_stored(lessons, r._mapping, f"gradebook lesson {r.id!r}", again="")
                     for r in conn.execute(_raw(lessons))]
            return [LessonInfo(r["id"], r["title"], r["rubric_version"], r["max_score"],
                               tuple(crit.get(r["id"], ())))
                    for r in sorted(infos, key=lambda r: r["id"])]

    def lesson(self, lesson: str) -> LessonInfo:
        for info in self.lessons():
            if info.id == lesson:
                return info
        held = [i.id for i in self.lessons()]
        raise InputError(lesson, f"no results for this lesson in the gradebook (lessons: "
                                 f"{', '.join(held) or 'none'}){did_you_mean(lesson, held)}")

    def results(self, lesson: str | None = None, student: str | None = None) -> list[StoredResult]:
        """Stored results ordered by student then lesson (by code point, as Python sorts,
        whatever the database's collation), each with its criterion scores. A value edited
        by hand into another type is one line naming the student, lesson and field
        (``_stored``)."""
        q = _raw(results)
        if lesson is not None:
            q = q.where(results.c.lesson == lesson)
        if student is not None:
            q = q.where(results.c.student == student)
        with self.engine.connect() as conn:
            rows = [_stored(results, r._mapping, _whose(r.student, r.lesson))
                    for r in conn.execute(q)]
            rows.sort(key=lambda r: (r["student"], r["lesson"]))
            held = {r.id for r in conn.execute(sa.select(lessons.c.id))}
            for r in rows:
                if r["lesson"] not in held:
                    # Its lesson's row removed by hand: an export listed the student with no
                    # column of that lesson (every score gone from the file, in silence), and
                    # feedback failed with a traceback. Writing it again makes the row.
                    raise InputError(_whose(r["student"], r["lesson"]), f"its lesson is not among the "
                                     f"gradebook's lessons ({', '.join(sorted(held)) or 'none'}; edited "
                                     f"by hand?): grade it again: grader grade {r['lesson']} ... --force")
            by_result: dict[int, list[CriterionScore]] = {}
            sq = _raw(scores).add_columns(results.c.student, results.c.lesson).join(
                results, scores.c.result_id == results.c.id)
            if lesson is not None:
                sq = sq.where(results.c.lesson == lesson)
            if student is not None:
                sq = sq.where(results.c.student == student)
            for s in conn.execute(sq):
                v = _stored(scores, s._mapping, _whose(s.student, s.lesson), f"criterion {s.criterion}'s ")
                by_result.setdefault(v["result_id"], []).append(
                    CriterionScore(v["criterion"], v["score"], v["max_score"], v["passed"], v["feedback"]))
        order = {(c.lesson, c.id): c.position for c in self._criteria_rows()}
        return [StoredResult(
            student=r["student"], lesson=r["lesson"], status=r["status"], score=r["score"],
            max_score=r["max_score"], submission_path=r["submission_path"],
            submission_digest=r["submission_digest"], rubric_version=r["rubric_version"],
            cases_digest=r["cases_digest"], grader_version=r["grader_version"],
            graded_at=r["graded_at"], duration_s=r["duration_s"], error=r["error"],
            scores=tuple(sorted(by_result.get(r["id"], ()),
                                key=lambda s, l=r["lesson"]: order.get((l, s.criterion), 1 << 30))),
            report_json=r["report"]) for r in rows]

    def _criteria_rows(self):
        with self.engine.connect() as conn:
            return conn.execute(sa.select(criteria.c.lesson, criteria.c.id, criteria.c.position)).all()


SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")      # what SQLite keeps beside a database
SQLITE_MAGIC = b"SQLite format 3\x00"


class GradebookWriteError(InputError):
    """A result could not be written; nothing written before it is lost."""


def open_gradebook(url: str, *, create: bool = True, read_only: bool = False) -> Gradebook:
    """A gradebook at a SQLAlchemy URL, or at a plain file path (taken as SQLite).

    A plain path is a gradebook only if it ends in .db, .sqlite or .sqlite3 or already is
    a SQLite file: ``--gradebook garbage`` is a typo, not a request for a new file named
    garbage. An in-memory SQLite URL is refused: a class graded into it would be lost.
    ``create=False`` (a command that only reads it: report, export, feedback) refuses a
    SQLite file that does not exist, and a gradebook that holds no result yet: a mistyped
    path would otherwise be an empty gradebook, and an export of no one. ``read_only`` (those
    three) opens it so that nothing is written, and a file one may only read is read."""
    given, made = url, None
    if "://" not in url:
        path = Path(url)
        if path.suffix.lower() not in SQLITE_SUFFIXES and not _is_sqlite(path):
            raise InputError(url, f"not a gradebook: give a SQLite file ending in "
                                  f"{', '.join(SQLITE_SUFFIXES)} (or an existing gradebook), or a "
                                  f"SQLAlchemy URL such as postgresql+psycopg://USER@HOST/DB")
        # Built, not parsed: in a URL's text a "?" or "#" in a folder's name would begin its
        # query, and the gradebook would be made at the path cut there.
        parsed = sa.engine.URL.create("sqlite", database=str(path.resolve()))
        url = f"sqlite:///{path.resolve()}"           # as it is shown
    else:
        try:
            parsed = sa.make_url(url)
        except (sa.exc.ArgumentError, ValueError):
            parsed = None                 # Gradebook says why, naming the URL
    if parsed is not None and parsed.get_backend_name() == "sqlite" \
            and parsed.database in (None, "", ":memory:") or "mode=memory" in url:
        raise InputError(shown_url(url), "an in-memory SQLite gradebook would lose every result "
                                         "when the grader ends; give a file (sqlite:///PATH.db)")
    if parsed is not None and parsed.get_backend_name() == "sqlite":
        where = Path(parsed.database)
        if where.exists() and not where.is_file():
            # SQLite says "unable to open database file" of a folder, and waits forever on a
            # named pipe for a writer that never comes.
            kind = "a folder" if where.is_dir() else NOT_REGULAR.removeprefix("is ")
            raise InputError(str(where), f"is {kind}, not a gradebook: give the gradebook's file")
        if not create and not where.exists():
            raise InputError(str(where), "no gradebook here: grade into it first (grader grade ... "
                                         "--gradebook), or give the gradebook your grades went to")
        if create and not where.parent.is_dir():
            raise InputError(str(where), f"cannot make the gradebook: the folder {where.parent} "
                                         "does not exist")
        if create and not where.exists():
            # Made private before SQLite writes to it: it holds every hidden case's feedback.
            # (An empty file is an empty SQLite database; SQLite gives its journal the same mode.)
            try:
                os.close(os.open(where, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                made = where
            except FileExistsError:
                pass
            except OSError as e:
                raise InputError(str(where), f"cannot make the gradebook: {e.strerror or e}") from None
    try:
        book = Gradebook(url, create=create, read_only=read_only,
                         location=parsed if "://" not in given else None)
    except BaseException:
        if made is not None:
            made.unlink(missing_ok=True)
        raise
    book.made_here = made
    return book


def _any_result(conn) -> bool:
    return conn.execute(sa.select(results.c.id).limit(1)).first() is not None


def _is_sqlite(path: Path) -> bool:
    try:
        return read_regular(path, len(SQLITE_MAGIC))[:len(SQLITE_MAGIC)] == SQLITE_MAGIC
    except (OSError, Unreadable):
        return False
