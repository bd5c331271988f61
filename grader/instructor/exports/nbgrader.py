"""nbgrader: the gradebook's scores written into an nbgrader gradebook database.

Lessons become assignments with one notebook, ``exercise``; rubric criteria become its
grade cells (max_score = the criterion's points); each result becomes a submission whose
grades carry the criterion scores as ``auto_score``. ``nbgrader export`` and formgrader
then show the same totals as this grader. A submission that could not be graded is there
with zero points. Re-exporting updates in place.

nbgrader is an optional extra: pip install 'serving-grader[nbgrader]'.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from grader.engine.errors import InputError
from grader.engine.progress import Progress
from grader.engine.text import first_few, one_line
from grader.instructor.outputs import cannot_write

NOTEBOOK = "exercise"
PROGRESS_AFTER_S = 2.0        # a quick export stays quiet; a longer one shows its count


def _url(out: str):
    """The nbgrader gradebook's URL: as given, or a path's, built rather than written as
    text (where a "?" or "#" in a folder's name would begin a query, and the export would
    go to the path cut there)."""
    import sqlalchemy as sa
    if "://" in out:
        return out
    path = Path(out).resolve()
    if path.is_dir():
        # SQLite's own words for it are "unable to open database file".
        raise InputError(out, "is a folder; give nbgrader's gradebook file to write (default "
                              "nbgrader/gradebook.db)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise cannot_write(out, "the nbgrader gradebook", e) from None
    return sa.engine.URL.create("sqlite", database=str(path))


def _submission(nb, db, assignment, student, cells):
    """The student's submitted assignment, with a grade row for every grade cell, and the
    grade rows of the lesson's criteria (``cells``, in the notebook ``exercise``) by name:
    those alone are this export's to score. An assignment of the same name made in nbgrader
    itself may hold notebooks and cells of its own, graded there."""
    sub = (db.query(nb.SubmittedAssignment)
           .filter(nb.SubmittedAssignment.assignment_id == assignment.id,
                   nb.SubmittedAssignment.student_id == student.id).one_or_none())
    if sub is None:
        sub = nb.SubmittedAssignment(assignment=assignment, student=student)
        db.add(sub)
    notebooks = {n.notebook_id: n for n in sub.notebooks}
    grades = {}
    for notebook in assignment.notebooks:
        snb = notebooks.get(notebook.id)
        if snb is None:
            # SQLAlchemy 2 does not cascade new objects into the session through
            # backrefs: each one is added explicitly.
            snb = nb.SubmittedNotebook(notebook=notebook, assignment=sub)
            db.add(snb)
        have = {g.cell_id: g for g in snb.grades}
        for cell in notebook.grade_cells:
            grade = have.get(cell.id)
            if grade is None:
                grade = nb.Grade(cell_id=cell.id, notebook=snb)
                db.add(grade)
            if notebook.name == NOTEBOOK and cell.name in cells:
                grades[cell.name] = grade
    return sub, grades


@contextmanager
def _alembic_on_path():
    """nbgrader runs the ``alembic`` command to version a new gradebook, found on PATH; a
    grader started from a venv that is not activated has it beside its interpreter only."""
    here = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if shutil.which("alembic") or not (Path(here) / "alembic").exists():
        yield
        return
    os.environ["PATH"] = here + os.pathsep + path
    try:
        yield
    finally:
        os.environ["PATH"] = path


def _refuse_what_is_not_nbgraders(url: str, out: str, nbgrader_tables) -> None:
    """nbgrader adds its tables to whatever database it is given, in silence: the grader's
    own gradebook typed for nbgrader's (`--out gradebook.db`), or another application's
    database (`--out` a slip of the shell). Written only when it is new, empty or holds
    nbgrader's tables alone (and the version table its alembic keeps); a database nbgrader
    cannot open is its to name."""
    import sqlalchemy as sa
    from grader.instructor.gradebook import schema_info
    try:
        engine = sa.create_engine(url)
    except (sa.exc.SQLAlchemyError, ImportError, ValueError):
        return
    try:
        with engine.connect() as conn:
            tables = sa.inspect(conn).get_table_names()
    except sa.exc.SQLAlchemyError:
        return
    finally:
        engine.dispose()
    if schema_info.name in tables:
        raise InputError(out, "is a gradebook of this grader, not nbgrader's: give nbgrader's "
                              "gradebook file (default nbgrader/gradebook.db)")
    others = sorted(set(tables) - set(nbgrader_tables) - {"alembic_version"})
    if others:
        raise InputError(out, f"holds tables that are not nbgrader's ({first_few(others)}), so it is "
                              f"left as it was: give nbgrader's gradebook file (default "
                              f"nbgrader/gradebook.db)")


def export_nbgrader(book, out: str, *, lesson: str | None = None, progress: bool = False,
                    stream=None, clock=time.monotonic) -> str:
    """``progress``: once the export has taken a few seconds, its count of results on stderr
    (``stream``), moving every second: a new nbgrader gradebook alone takes seconds to make
    (nbgrader runs alembic), and a class's results as long again."""
    try:
        from nbgrader import api as nb
    except ImportError:
        raise InputError("--format nbgrader",
                         "nbgrader is not installed: pip install 'serving-grader[nbgrader]'") from None
    infos = [i for i in book.lessons() if lesson is None or i.id == lesson]
    if lesson is not None and not infos:
        book.lesson(lesson)
    url = _url(out)
    _refuse_what_is_not_nbgraders(url, out, nb.Base.metadata.tables)
    kept = {i.id for i in infos}
    rows = [r for r in book.results(lesson) if r.lesson in kept]
    bar = Progress(len(rows), "exporting to nbgrader", stream=stream, enabled=progress, clock=clock,
                   heartbeat_s=1.0, delay_s=PROGRESS_AFTER_S)
    try:
        try:
            with _alembic_on_path():
                gb = nb.Gradebook(url)
        except Exception as e:            # nbgrader wraps SQLAlchemy; any failure here is the URL's
            # The driver's own words, on one line: SQLAlchemy's text adds the SQL and a web page.
            raise InputError(out, f"cannot open the nbgrader gradebook: "
                                  f"{one_line(getattr(e, 'orig', None) or e)}") from None
        with gb:
            for info in infos:
                gb.update_or_create_assignment(info.id)
                gb.update_or_create_notebook(NOTEBOOK, info.id)
                for c in info.criteria:
                    gb.update_or_create_grade_cell(c.id, NOTEBOOK, info.id, max_score=c.max_score,
                                                   cell_type="code")
            db = gb.db
            assignments = {a.name: a for a in gb.assignments}
            students = {s.id: s for s in db.query(nb.Student)}
            cells = {i.id: {c.id for c in i.criteria} for i in infos}
            for r in rows:
                with db.no_autoflush:
                    _store(nb, db, assignments[r.lesson], students, r, cells[r.lesson])
                bar.advance()
            db.commit()
    finally:
        bar.finish()
    return out


def _store(nb, db, assignment, students, r, cells) -> None:
    """One result as the student's submission of the assignment, its criteria's grades as
    auto scores (``cells``: the lesson's criteria; no other grade is changed)."""
    student = students.get(r.student)
    if student is None:
        student = students[r.student] = nb.Student(id=r.student)
        db.add(student)
    sub, grades = _submission(nb, db, assignment, student, cells)
    if sub.timestamp is None or sub.id is None:
        # A submission nbgrader collected keeps its own time: the hand-in time its lateness
        # is reckoned from, which the grade's time is not. One this export made has the
        # grade's (nbgrader stores naive UTC).
        sub.timestamp = r.graded_at.replace(tzinfo=None)
    scored = {s.criterion: s.score for s in r.scores}
    for name, grade in grades.items():
        grade.auto_score = scored.get(name, 0.0)
        grade.needs_manual_grade = False
