"""Exports: CSV that survives a round trip, nbgrader's gradebook (checked with nbgrader
itself), and one feedback file per student. (Gradescope: tests/test_gradescope.py.)"""
import csv
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SECRET, SUBMISSIONS, grade
from grader.engine.errors import InputError
from grader.instructor.exports import safe_name
from grader.instructor.exports.csv import table
from grader.instructor.exports.feedback import write_feedback
from grader.instructor.exports.nbgrader import export_nbgrader
from grader.instructor.gradebook import LessonInfo, open_gradebook
from test_gradebook import fake_report

STUDENTS = {   # name -> submission: names a CSV, a file system and a spreadsheet all find awkward
    "O'Brien, Pat": ROOT / "reference" / "solutions" / "lesson1.py",
    'Ana "Nan" Lima': SUBMISSIONS / "lesson1" / "always_ok.py",
    "Zoë Ångström": SUBMISSIONS / "lesson1" / "raises.py",
    "=HYPERLINK(\"x\")": SUBMISSIONS / "lesson1" / "wrong_types.py",
    "../../etc/passwd": SUBMISSIONS / "lesson1" / "alt_correct.py",
}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "gb.db"
    with open_gradebook(str(path)) as book:
        for name, sub in STUDENTS.items():
            book.record(name, grade("lesson1", sub, "grade", SECRET).to_dict())
        book.record_error("no show", LessonInfo("lesson1", "The request contract", 1, 10.0, ()),
                          "submitted/no show/lesson1", "no submission for lesson1")
        book.record("O'Brien, Pat", fake_report(lesson="lesson9"))   # a second lesson, hidden criterion
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def stored(url):
    with open_gradebook(url) as book:
        return {(r.student, r.lesson): r for r in book.results()}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_csv_round_trips_through_pythons_csv_module(url, stored, tmp_path):
    out = tmp_path / "grades.csv"
    p = cli("export", "--gradebook", url, "--format", "csv", "--out", str(out))
    assert p.returncode == 0, p.stderr
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw       # BOM for spreadsheets, RFC 4180 rows
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    assert header[:3] == ["student", "lesson1 total", "lesson1/kv-bytes"]
    assert "lesson9 total" in header and header[-1] == "notes"
    by_name = {row[0]: dict(zip(header, row)) for row in body}
    # Names with commas, quotes and accents come back exactly; a formula is defused.
    assert {"O'Brien, Pat", 'Ana "Nan" Lima', "Zoë Ångström", "../../etc/passwd", "no show"} <= set(by_name)
    assert "'=HYPERLINK(\"x\")" in by_name
    for (student, lesson), r in stored.items():
        row = by_name["'" + student if student.startswith("=") else student]
        assert float(row[f"{lesson} total"]) == pytest.approx(r.score)
        for s in r.scores:
            assert float(row[f"{lesson}/{s.criterion}"]) == pytest.approx(s.score)
    assert by_name["no show"]["notes"] == "lesson1: no submission for lesson1"
    assert by_name["no show"]["lesson1/kv-bytes"] == "" and by_name["no show"]["lesson9 total"] == ""


def test_csv_to_stdout_and_one_lesson(url):
    p = cli("export", "--gradebook", url, "--format", "csv", "--lesson", "lesson9")
    assert p.returncode == 0
    rows = list(csv.reader(p.stdout.splitlines()))
    assert rows[0] == ["student", "lesson9 total", "lesson9/c0", "lesson9/c1", "notes"]
    assert [r[0] for r in rows[1:]] == ["O'Brien, Pat"]
    p = cli("export", "--gradebook", url, "--format", "csv", "--lesson", "lesson7")
    assert p.returncode == 2 and "no results for this lesson" in p.stderr
    # A name a little off names the lesson meant (the gradebook keys by the name, so only named).
    p = cli("export", "--gradebook", url, "--format", "csv", "--lesson", "Lesson01")
    assert p.returncode == 2 and p.stderr == ("grader: Lesson01: no results for this lesson in the gradebook "
                                              "(lessons: lesson1, lesson9); did you mean lesson1?\n")


def test_gradescope_is_not_an_export(url):
    # Gradescope cannot import results files; its autograder grades in its container.
    p = cli("export", "--gradebook", url, "--format", "gradescope")
    assert p.returncode == 2 and "invalid choice: 'gradescope'" in p.stderr
    p = cli("export", "--help")
    assert "grader gradescope LESSON" in p.stdout


def test_nbgrader_gradebook_and_nbgrader_export_show_the_same_totals(url, stored, tmp_path):
    from nbgrader.api import Gradebook as NbGradebook
    db = tmp_path / "gradebook.db"
    p = cli("export", "--gradebook", url, "--format", "nbgrader", "--out", str(db))
    assert p.returncode == 0, p.stderr
    with open_gradebook(url) as book:         # exporting again updates in place
        export_nbgrader(book, str(db))
    with NbGradebook(f"sqlite:///{db}") as gb:
        assert sorted(a.name for a in gb.assignments) == ["lesson1", "lesson9"]
        cells = [c.name for c in gb.find_notebook("exercise", "lesson1").grade_cells]
        assert sorted(cells) == sorted(s.criterion for s in stored[("O'Brien, Pat", "lesson1")].scores)
        totals = {(s.student.id, lesson): s.score for lesson in ("lesson1", "lesson9")
                  for s in gb.assignment_submissions(lesson)}
        for (student, lesson), r in stored.items():
            assert totals[(student, lesson)] == pytest.approx(r.score)
            sub = gb.find_submission(lesson, student)
            assert len(sub.notebooks) == 1
            got = {g.name: g.auto_score for g in sub.notebooks[0].grades}
            assert got == {s.criterion: pytest.approx(s.score) for s in r.scores} or r.status == "error"
    # nbgrader's own command reads the same totals (its CSV does not quote, so plain names only).
    p = subprocess.run([sys.executable, "-m", "nbgrader", "export", f"--db=sqlite:///{db}",
                        "--to", str(tmp_path / "nb.csv")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with (tmp_path / "nb.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f)]
    plain = {(s, l): r for (s, l), r in stored.items() if "," not in s and '"' not in s}
    seen = {(row["student_id"], row["assignment"]): float(row["raw_score"]) for row in rows
            if (row["student_id"], row["assignment"]) in plain}
    for key, r in plain.items():
        assert seen[key] == pytest.approx(r.score)


def test_an_nbgrader_export_changes_no_grade_nbgrader_gave_itself(url, stored, tmp_path):
    """Exported into the course's own nbgrader gradebook, where the assignment lesson1 was
    also made in nbgrader (a notebook of its own, autograded and manually graded cells): the
    export set every grade cell of the assignment to its criteria's score or 0, so the
    autograded 3 of 3 became 0, a cell waiting for manual grading was marked done, and the
    time the student handed it in (what nbgrader reckons lateness from) became the grade's."""
    from nbgrader.api import Gradebook as NbGradebook
    from grader.instructor.exports.nbgrader import _alembic_on_path
    db = tmp_path / "gradebook.db"
    student = "O'Brien, Pat"
    # The course's own gradebook, made by nbgrader here as the instructor's nbgrader made it:
    # it versions a new one with `alembic`, found on PATH (a venv not activated: beside python).
    with _alembic_on_path(), NbGradebook(f"sqlite:///{db}") as gb:
        gb.update_or_create_assignment("lesson1")
        gb.update_or_create_notebook("essay", "lesson1")
        gb.update_or_create_grade_cell("auto-q", "essay", "lesson1", max_score=3, cell_type="code")
        gb.update_or_create_grade_cell("manual-q", "essay", "lesson1", max_score=5, cell_type="markdown")
        gb.add_student(student)
        gb.add_submission("lesson1", student)
        auto, manual = (gb.find_grade(c, "essay", "lesson1", student) for c in ("auto-q", "manual-q"))
        auto.auto_score, auto.needs_manual_grade = 3.0, False
        manual.auto_score, manual.needs_manual_grade = None, True
        handed_in = datetime.datetime(2026, 3, 1, 23, 59)
        gb.find_submission("lesson1", student).timestamp = handed_in
        gb.db.commit()
    p = cli("export", "--gradebook", url, "--format", "nbgrader", "--out", str(db))
    assert p.returncode == 0, p.stderr
    with NbGradebook(f"sqlite:///{db}") as gb:
        auto, manual = (gb.find_grade(c, "essay", "lesson1", student) for c in ("auto-q", "manual-q"))
        assert (auto.auto_score, auto.needs_manual_grade) == (3.0, False)
        assert (manual.auto_score, manual.needs_manual_grade) == (None, True)
        assert gb.find_submission("lesson1", student).timestamp == handed_in   # its lateness's
        ours = {g.name: g.auto_score for g in gb.find_submission_notebook("exercise", "lesson1", student).grades}
        assert ours == {s.criterion: pytest.approx(s.score) for s in stored[(student, "lesson1")].scores}


def test_an_nbgrader_export_into_a_folder_whose_name_has_a_hash_or_a_question_mark_goes_there(url, tmp_path):
    """Written as a URL's text, "nbgrader C#?/gradebook.db" was cut at the "#": the export
    said it wrote there and made a file "nbgrader C" beside it."""
    from nbgrader.api import Gradebook as NbGradebook
    import sqlalchemy as sa
    db = tmp_path / "nbgrader C#?" / "gradebook.db"
    p = cli("export", "--gradebook", url, "--format", "nbgrader", "--out", str(db))
    assert p.returncode == 0, p.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nbgrader C#?"]
    with NbGradebook(sa.engine.URL.create("sqlite", database=str(db))) as gb:
        assert sorted(a.name for a in gb.assignments) == ["lesson1", "lesson9"]


def test_nbgrader_export_from_a_venv_that_is_not_activated(tmp_path, url, monkeypatch):
    # nbgrader versions a new gradebook by running `alembic` from PATH; an instructor who runs
    # the venv's grader by its path has that command only beside the interpreter.
    from nbgrader.api import Gradebook as NbGradebook
    if not (Path(sys.executable).parent / "alembic").exists():
        pytest.fail(f"the test environment has no alembic beside {sys.executable}")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    before = os.environ["PATH"]
    db = tmp_path / "fresh.db"
    with open_gradebook(url) as book:
        export_nbgrader(book, str(db))
    assert os.environ["PATH"] == before          # the grader's environment is left as it was
    with NbGradebook(f"sqlite:///{db}") as gb:
        assert sorted(a.name for a in gb.assignments) == ["lesson1", "lesson9"]


@pytest.mark.parametrize("seconds_a_step", [0, 1], ids=["quick", "long"])
def test_an_nbgrader_export_shows_its_progress_once_it_takes_a_while(url, stored, tmp_path, seconds_a_step):
    """Like grading a class, a long export writes its count on stderr (in a log, a plain
    line); a quick one writes nothing. Time is a clock that moves a set step each time it
    is read, never slept."""
    import io
    import itertools
    ticks = itertools.count(1000, seconds_a_step)
    log = io.StringIO()
    with open_gradebook(url) as book:
        export_nbgrader(book, str(tmp_path / "nb.db"), progress=True, stream=log,
                        clock=lambda: next(ticks))
    lines = log.getvalue().splitlines()
    if seconds_a_step == 0:
        assert lines == []
        return
    n = len(stored)                      # every result of every lesson, one at a time
    assert lines and all(l.startswith("exporting to nbgrader [") for l in lines), lines
    assert lines[-1].startswith(f"exporting to nbgrader [{'#' * 28}] {n}/{n}  "), lines
    assert "\r" not in log.getvalue()    # a log, not a terminal: no redrawn line


def test_an_nbgrader_export_from_the_command_line_asks_for_progress(url, tmp_path, monkeypatch):
    from grader.cli import main
    from grader.instructor.exports import nbgrader
    asked = {}

    def export(book, out, **kw):
        asked.update(kw)
        return out
    monkeypatch.setattr(nbgrader, "export_nbgrader", export)
    assert main(["export", "--format", "nbgrader", "--gradebook", url, "--out", str(tmp_path / "nb.db")]) == 0
    assert asked == {"lesson": None, "progress": True}


def test_nbgrader_missing_is_an_input_error(tmp_path, url, monkeypatch):
    monkeypatch.setitem(sys.modules, "nbgrader", None)
    with open_gradebook(url) as book, pytest.raises(InputError, match="pip install"):
        export_nbgrader(book, str(tmp_path / "x.db"))


def test_an_nbgrader_export_into_a_gradebook_of_this_grader_is_refused_and_writes_nothing(url, tmp_path,
                                                                                          capsys):
    """`--out gradebook.db`, the grader's own gradebook typed for nbgrader's: nbgrader's
    tables were added to it in silence."""
    import shutil
    import sqlalchemy as sa
    from grader.cli import main
    ours = tmp_path / "gradebook.db"
    shutil.copy(url.removeprefix("sqlite:///"), ours)
    before = sorted(sa.inspect(sa.create_engine(f"sqlite:///{ours}")).get_table_names())
    code = main(["export", "--format", "nbgrader", "--gradebook", url, "--out", str(ours)])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"grader: {ours}: is a gradebook of this grader, not nbgrader's: give "
                                 "nbgrader's gradebook file (default nbgrader/gradebook.db)\n"), err
    assert sorted(sa.inspect(sa.create_engine(f"sqlite:///{ours}")).get_table_names()) == before


def test_an_nbgrader_export_into_another_applications_database_is_refused_and_keeps_it(url, tmp_path,
                                                                                        capsys):
    """`--out` naming a SQLite database of another application (a slip of the shell, a
    file of the department's): nbgrader's thirteen tables were added beside its own, in
    silence. Only a new, empty or nbgrader's own gradebook is written."""
    import sqlite3
    theirs = tmp_path / "invoices.db"
    with sqlite3.connect(theirs) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER, amount REAL)")
        conn.execute("INSERT INTO invoices VALUES (1, 9.5)")
    before = theirs.read_bytes()
    from grader.cli import main
    code = main(["export", "--format", "nbgrader", "--gradebook", url, "--out", str(theirs)])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"grader: {theirs}: holds tables that are not nbgrader's (invoices), so "
                                 "it is left as it was: give nbgrader's gradebook file (default "
                                 "nbgrader/gradebook.db)\n"), err
    assert theirs.read_bytes() == before


def test_an_nbgrader_export_into_a_file_that_is_no_database_is_one_line_and_keeps_it(url, tmp_path, capsys):
    """`--out grades.csv` typed for nbgrader's gradebook: the driver's reason on one line
    (not SQLAlchemy's text, with its SQL statement and a web address), the file as it was."""
    from grader.cli import main
    sheet = tmp_path / "grades.csv"
    sheet.write_bytes(b'\xef\xbb\xbf"student","notes"\r\n"alice",""\r\n')
    code = main(["export", "--format", "nbgrader", "--gradebook", url, "--out", str(sheet)])
    err = capsys.readouterr().err
    assert code == 2 and err == f"grader: {sheet}: cannot open the nbgrader gradebook: file is not a database\n", err
    assert sheet.read_bytes() == b'\xef\xbb\xbf"student","notes"\r\n"alice",""\r\n'


def test_an_nbgrader_export_into_a_folder_says_it_is_a_folder(url, tmp_path, capsys):
    """`--out nbgrader/`, the folder typed for the gradebook file in it: SQLite's words were
    "unable to open database file"."""
    from grader.cli import main
    folder = tmp_path / "my nbgrader"
    folder.mkdir()
    code = main(["export", "--format", "nbgrader", "--gradebook", url, "--out", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"grader: {folder}: is a folder; give nbgrader's gradebook file to write "
                                 "(default nbgrader/gradebook.db)\n"), err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("args, out", [
    (["export", "--format", "csv"], "grades.csv"),
    (["export", "--format", "nbgrader"], "nb/gradebook.db"),
    (["feedback"], "feedback"),
    (["report", "lesson1"], "report"),
    (["feedback"], ""),                    # --out the file itself, where the folder goes
    (["report", "lesson1"], ""),
])
def test_an_unwritable_out_is_one_line_naming_it(url, tmp_path, capsys, args, out):
    from grader.cli import main
    blocker = tmp_path / "a-file"          # a file where a folder should be: unwritable even for root
    blocker.write_text("")
    target = blocker / out if out else blocker
    code = main([*args, "--gradebook", url, "--out", str(target)])
    printed, err = capsys.readouterr()
    assert code == 2 and printed == "", (code, printed, err)
    assert err.startswith(f"grader: {target}: ") and err.count("\n") == 1, err
    assert err.endswith(f": {blocker} is a file, not a folder\n"), err     # not "Not a directory"
    assert "Traceback" not in err


@pytest.mark.parametrize("args, target, kind", [
    (["export", "--format", "csv", "--out", "{gradebook}"], "{gradebook}", "CSV export"),  # gra<TAB>
    (["export", "--format", "csv", "--out", "{dir}/course.secret"], "{dir}/course.secret", "CSV export"),
    (["feedback", "--out", "{dir}"], "{dir}/no show.md", "feedback file"),
    (["feedback", "--format", "html", "--out", "{dir}"], "{dir}/no show.html", "feedback file"),
    (["report", "lesson1", "--out", "{dir}"], "{dir}/index.html", "class report"),
    (["report", "lesson1", "--out", "{dir}"], "{dir}/scores.png", "figure"),
])
def test_an_out_that_holds_something_else_is_refused_and_left_as_it_was(url, tmp_path, capsys, args, target,
                                                                        kind):
    """An export replaces only what the same command wrote before: a slip of the shell or
    the hand that names the gradebook, the secret or a file of the same name is refused
    before anything is written, and the file keeps every byte."""
    from grader.cli import main
    gradebook = tmp_path / "gb.db"
    gradebook.write_bytes(Path(url.removeprefix("sqlite:///")).read_bytes())
    names = {"gradebook": str(gradebook), "dir": str(tmp_path / "out")}
    (tmp_path / "out").mkdir()
    target = Path(target.format(**names))
    if not target.exists():
        target.write_bytes(b"the instructor's own notes\n")
    before = target.read_bytes()
    code = main([*(a.format(**names) for a in args), "--gradebook", str(gradebook)])
    printed, err = capsys.readouterr()
    assert code == 2 and printed == "", (code, printed, err)
    assert err == (f"grader: {target}: exists and is not an earlier {kind}, so it is left as it was: "
                   "give another --out, or remove the file first\n"), err
    assert target.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ([target.name] if target.parent.name == "out"
                                                                     else [])


def test_an_export_stopped_half_way_by_a_full_disk_keeps_the_earlier_one(tmp_path):
    """A write that fails part way (the disk full) leaves the earlier export as it was, and
    no part-written file beside it."""
    import sqlite3
    from conftest import run_grader
    gradebook = tmp_path / "gb.db"
    with open_gradebook(str(gradebook)) as book:
        for n in range(60):
            book.record(f"student {n:02}", fake_report())
    out = tmp_path / "out"
    out.mkdir()
    csv_file = out / "grades.csv"
    args = ("export", "--format", "csv", "--gradebook", str(gradebook), "--out", str(csv_file))
    assert run_grader(*args)[0] == 0
    before = csv_file.read_bytes()
    assert len(before) > 2000
    with open_gradebook(str(gradebook)) as book:
        book.record("student 00", fake_report(got=(0.0, 0.0)))      # the export would differ
    reader = sqlite3.connect(gradebook)                 # keeps SQLite's -shm as it is meanwhile
    reader.execute("SELECT count(*) FROM results").fetchone()
    try:
        code, _, err = run_grader(*args, full_disk_at=1000)
    finally:
        reader.close()
    assert code == 2 and err.startswith(f"grader: {csv_file}: cannot write the CSV: "), err
    assert err.count("\n") == 1
    assert csv_file.read_bytes() == before
    assert [f.name for f in out.iterdir()] == ["grades.csv"]


def test_feedback_stopped_half_way_by_a_full_disk_keeps_each_earlier_page(tmp_path):
    """A page was written in place: a disk that filled up part way left a student's page
    cut off (its table without its rows, its list of what to work on half there), which
    read as the whole of their feedback. Each page is written whole or not at all."""
    import sqlite3
    from conftest import run_grader
    gradebook = tmp_path / "gb.db"
    with open_gradebook(str(gradebook)) as book:
        for n in range(3):
            book.record(f"student {n}", fake_report())
    out = tmp_path / "feedback"
    args = ("feedback", "--gradebook", str(gradebook), "--out", str(out))
    assert run_grader(*args)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    limit = min(len(page) for page in before.values()) // 2
    with open_gradebook(str(gradebook)) as book:
        book.record("student 0", fake_report(got=(0.0, 0.0)))      # its page would differ
    reader = sqlite3.connect(gradebook)                 # keeps SQLite's -shm as it is meanwhile
    reader.execute("SELECT count(*) FROM results").fetchone()
    try:
        code, _, err = run_grader(*args, full_disk_at=limit)
    finally:
        reader.close()
    assert code == 2 and err.startswith(f"grader: {out}: cannot write feedback files: "), err
    assert err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("args, written", [
    (["export", "--format", "csv", "--out", "{dir}/grades.csv"], ["grades.csv"]),
    (["feedback", "--out", "{dir}"], ["no show.md"]),
    (["report", "lesson1", "--out", "{dir}"], ["criteria.png", "index.html", "scores.png"]),
])
def test_an_earlier_output_of_the_same_command_is_replaced(url, tmp_path, capsys, args, written):
    """Run again (after a regrade), each writes over its own earlier output, and over an
    empty file, which holds nothing to lose."""
    from grader.cli import main
    out = tmp_path / "out"
    out.mkdir()
    argv = [a.format(dir=out) for a in args] + ["--gradebook", url]
    assert main(argv) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(written) <= set(first)
    (out / written[0]).write_bytes(b"")
    assert main(argv) == 0, capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def _own_png(path: Path) -> bytes:
    """A PNG of the instructor's own (a plot they drew), as matplotlib writes any PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    plt.close(fig)
    return path.read_bytes()


def test_a_png_of_the_instructors_own_is_no_figure_of_the_report(url, tmp_path, capsys):
    """`report --out` replaced any PNG named scores.png or criteria.png (a figure was told
    by the PNG signature alone): an instructor's own plot in the folder went in silence.
    The report's figures name their maker, so a PNG that does not is refused and kept."""
    from grader.cli import main
    out = tmp_path / "plots"
    out.mkdir()
    before = _own_png(out / "scores.png")
    assert main(["report", "lesson1", "--gradebook", url, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"grader: {out / 'scores.png'}: exists and is not an earlier figure, so it is left "
                   "as it was: give another --out, or remove the file first\n"), err
    assert (out / "scores.png").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["scores.png"]


def test_a_figure_drawn_before_figures_named_their_maker_is_replaced_beside_its_page(url, tmp_path, capsys):
    """An earlier report (its page, and figures drawn before they carried their maker's
    name) is replaced whole: the figures beside a class report's page are its own."""
    from grader.cli import main
    out = tmp_path / "report"
    argv = ["report", "lesson1", "--gradebook", url, "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    for name in ("scores.png", "criteria.png"):
        _own_png(out / name)                # as an older grader drew them: no maker named
    assert main(argv) == 0, capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_feedback_files_one_per_student(url, stored, tmp_path, fmt):
    p = cli("feedback", "--gradebook", url, "--out", str(tmp_path / "fb"), "--format", fmt)
    assert p.returncode == 0, p.stderr
    files = sorted((tmp_path / "fb").iterdir())
    students = {s for s, _ in stored}
    assert len(files) == len(students) and all(f.suffix == f".{fmt}" for f in files)
    ana = 'Ana "Nan" Lima'
    page = (tmp_path / "fb" / f"{safe_name(ana)}.{fmt}").read_text()
    lost = [s for s in stored[('Ana "Nan" Lima', "lesson1")].scores if not s.passed]
    assert lost and all(s.criterion in page for s in lost)
    if fmt == "html":
        assert "Ana &quot;Nan&quot; Lima" in page and "<script" not in page
    else:
        assert page.startswith('# Feedback for Ana "Nan" Lima')
    assert "said ok, but it breaks the contract" in page      # the feedback line: which, why
    assert "expected one of" in page


def test_feedback_public_only_hides_hidden_criteria_feedback(url, tmp_path):
    with open_gradebook(url) as book:
        [path] = [p for p in write_feedback(book, str(tmp_path), lesson="lesson9", public_only=True)]
        page = path.read_text()
        assert "feedback 1" not in page and "published later" in page
        [path] = write_feedback(book, str(tmp_path / "all"), lesson="lesson9")
        assert "feedback 1" in path.read_text()


def test_public_only_pages_written_over_full_ones_name_the_full_pages_left_in_the_folder(url, stored, tmp_path,
                                                                                        capsys):
    """Full feedback first (for the instructor), then --public-only for one lesson into the
    same folder, to send: the students with no result of that lesson keep their full page,
    which names hidden cases. The run names each page it left, so none is sent unawares."""
    from grader.cli import main
    out = tmp_path / "fb"
    assert main(["feedback", "--gradebook", url, "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"wrote {len({s for s, _ in stored})} feedback files to {out}\n"
    (out / "notes.md").write_text("# my notes\n")                 # not a page: not named
    assert main(["feedback", "--gradebook", url, "--out", str(out), "--lesson", "lesson9", "--public-only"]) == 0
    err = capsys.readouterr().err
    left = sorted(f"{safe_name(s)}.md" for s in {s for s, _ in stored} if (s, "lesson9") not in stored)
    assert len(left) == 5
    assert err == (f"wrote 1 feedback file to {out}\ngrader: {out} also holds 5 earlier feedback files this "
                   f"run did not write ({', '.join(left)}): remove them before sending the folder\n"), err


def test_safe_names_stay_inside_the_folder():
    assert safe_name("alice") == "alice"
    for name in ("../../etc/passwd", ".hidden", "", "a/b", "a\\b", "con:x"):
        clean = safe_name(name)
        assert "/" not in clean and "\\" not in clean and not clean.startswith(".") and clean
    assert safe_name("a/b") != safe_name("a_b")


def test_a_student_named_as_a_windows_device_gets_a_page_windows_can_hold():
    """A login "con" (or "aux", "nul", "com1", "lpt1", in any case and with any suffix) had
    the page con.md, which Windows cannot make: the feedback folder, unpacked there, stopped
    at that student. Names that only begin so are left as they are."""
    for name in ("con", "CON", "Aux", "nul.x", "com1", "LPT9"):
        page = safe_name(name) + ".md"
        assert page.startswith(name.split(".")[0]) and page != name + ".md", page
        assert not re.fullmatch(r"(?i)(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?", page), page
    for name in ("console", "conan", "com10", "auxiliary", "nully"):
        assert safe_name(name) == name


def test_a_student_named_by_a_file_name_of_255_bytes_gets_a_page_the_disk_can_hold(tmp_path):
    """84 CJK characters are a 255-byte file name, the most a disk holds: the page's name
    (".html" added) was longer, and feedback stopped half way, "File name too long"."""
    long_ones = ["漢" * 84, "漢" * 84 + "字", "a" * 250, "a" * 250 + "b"]
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student in long_ones:
            book.record(student, fake_report())
        for fmt in ("md", "html"):
            written = write_feedback(book, str(tmp_path / fmt), fmt=fmt)
            assert len(written) == len(long_ones) == len({p.name for p in written})
            assert all(len(p.name.encode()) <= 255 for p in written)


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_students_whose_names_differ_only_in_case_get_pages_a_case_blind_disk_tells_apart(tmp_path, fmt):
    """On macOS's or Windows' disk Alice.md and alice.md are one file: one student's page
    would be written over by the other's, and sent to the wrong student."""
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student, got in (("Alice", (2.0, 1.0)), ("alice", (0.0, 0.0)), ("bob", (2.0, 0.0))):
            book.record(student, fake_report(got=got))
        written = write_feedback(book, str(tmp_path / "fb"), fmt=fmt)
    names = [p.name for p in written]
    assert len({n.casefold() for n in names}) == 3, names
    assert f"bob.{fmt}" in names                        # a name no other folds to stays as it was
    for path, student in zip(written, ("Alice", "alice", "bob")):
        assert f"Feedback for {student}" in path.read_text()


def test_a_student_named_as_anothers_hashed_page_gets_a_page_of_their_own(tmp_path):
    """Alice and alice get hashed page names; a third student whose own name is alice's
    hashed one (found from the name alone: the hash is of the name) was given the same
    file, so one page was written over by the other and sent to the wrong student. Every
    student's page is their own, whatever they are named."""
    import hashlib
    hashed_alice = "alice-" + hashlib.sha256(b"alice").hexdigest()[:8]
    students = ("Alice", "alice", hashed_alice)
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student in students:
            book.record(student, fake_report())
        written = write_feedback(book, str(tmp_path / "fb"))
    assert len({p.name.casefold() for p in written}) == 3, [p.name for p in written]
    assert len(list((tmp_path / "fb").iterdir())) == 3
    for path, student in zip(written, sorted(students)):
        heading = path.read_text().splitlines()[0].replace("\\", "")      # Markdown escapes the '-'
        assert heading == f"# Feedback for {student}", (path, heading)


def test_a_row_graded_under_an_older_rubric_says_so_in_its_notes(tmp_path):
    """A regrade under rubric version 2 that did not reach bob (his file gone, the run
    stopped): his points are out of version 1's 3, under a header of version 2's 4. The
    row says so; the report warns the same way."""
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        book.record("bob", fake_report(rubric_version=1))
        book.record("alice", fake_report(rubric_version=2, points=(3.0, 1.0), got=(3.0, 1.0)))
        header, rows = table(book)
    notes = {row[0]: row[header.index("notes")] for row in rows}
    assert notes == {"alice": "", "bob": "lesson1: graded under rubric version 1, not 2: grade the class again"}


def test_a_row_graded_on_other_hidden_cases_says_so_in_its_notes(tmp_path, monkeypatch):
    """A regrade with a new secret stopped part way (--force, then Ctrl-C or kill -9) leaves
    the class graded on two sets of hidden cases. The class report warns of it; the CSV, the
    sheet that goes on to the grade book, had no word: each row not graded on the class's
    latest cases says so, as a row of an older rubric does."""
    from grader.instructor import gradebook
    old = ({"family": "f", "name": "hidden:aaa", "visibility": "hidden"},)
    new = ({"family": "f", "name": "hidden:bbb", "visibility": "hidden"},)
    clock = iter(datetime.datetime(2026, 1, 1, 9, m, tzinfo=datetime.timezone.utc) for m in range(10))
    monkeypatch.setattr(gradebook, "_now", lambda: next(clock))
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        for student in ("alice", "bob", "carol"):          # the class, on the old secret
            book.record(student, fake_report(cases=old))
        book.record("alice", fake_report(cases=new))        # the regrade, stopped after alice
        header, rows = table(book)
    notes = {row[0]: row[header.index("notes")] for row in rows}
    assert notes["alice"] == ""
    for student in ("bob", "carol"):
        assert notes[student].startswith("lesson1: graded on other hidden cases (")
        assert "grade the class again with one secret" in notes[student]


def test_table_without_results_is_just_a_header(tmp_path):
    with open_gradebook(str(tmp_path / "empty.db")) as book:
        assert table(book) == (["student", "notes"], [])


def test_markdown_feedback_writes_a_students_name_and_file_name_as_literal_text():
    """Both come from what was handed in (a class folder's file names): a name that is HTML
    or a Markdown link must not become one in the page."""
    from grader.instructor.exports.feedback import markdown
    hostile = "x<img src=x onerror=alert(1)>[click](http://evil)"
    page = markdown(hostile, [("lesson1: T: 0 / 10", [f"Graded; submission {hostile}.py (sha256 0)",
                                                      f"Not graded: {hostile}.py: SyntaxError"], [], [])])
    assert page.startswith("# Feedback for x\\<img src=x onerror=alert\\(1\\)\\>\\[click\\]\\(http\\://evil\\)\n")
    unescaped = page.replace("\\<", "").replace("\\[", "").replace("\\(", "")
    assert "<img" not in unescaped and "[click]" not in unescaped and "](" not in unescaped
    assert page.count("x\\<img") == 3


def test_markdown_feedback_makes_no_bare_link_of_what_a_submission_says():
    """GitHub's Markdown links a bare URL, www. name or e-mail address with no brackets to
    escape: a submission's exception message (or its file's name) was a link in its student's
    page. Each is broken by an escape, and reads the same once rendered."""
    from grader.instructor.exports.feedback import markdown
    said = "Boom: log in at https://evil.example/login or WWW.evil.example, mail me@evil.example"
    page = markdown("www.mallory.example", [("lesson1: T: 0 / 10", [], [("c", "t", "0 / 1", "fail")],
                                             [("c", said)])])
    assert "https\\://evil.example/login" in page and "WWW\\.evil" in page and "me\\@evil" in page
    assert page.startswith("# Feedback for www\\.mallory.example\n")
    for bare in ("://", "www.", "WWW.", "@"):
        assert bare not in page.replace("\\" + bare[0], ""), bare


def test_a_grader_failure_keeps_its_detail_for_the_instructor_and_not_the_student(tmp_path, monkeypatch):
    """The grader failing on one submission is an error row: the instructor's summary and
    gradebook keep the exception (it may name their machine's paths), the student's
    feedback says only that the grader failed, not their code. A reason of their own (a
    missing file) stays as it is, since it is theirs to fix."""
    from grader.engine.layout import find_course
    from grader.instructor import batch

    def broken(*_args):
        raise RuntimeError("/home/instructor/course/grader/engine/cases.py went wrong")
    monkeypatch.setattr(batch, "grade_one", broken)
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text((ROOT / "reference/solutions/lesson1.py").read_text())
    (folder / "bob.txt").write_text("not python")
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        summary = batch.run_batch("lesson1", folder, find_course(str(ROOT)), SECRET, book, jobs=1,
                                  progress=False)
        detail = "the grader failed on this submission: RuntimeError: /home/instructor/course/"
        assert detail in dict(summary.failed)["alice"]
        errors = {r.student: r.error for r in book.results("lesson1")}
        assert errors["alice"].startswith(detail)
        pages = {p.stem: p.read_text(encoding="utf-8") for p in write_feedback(book, str(tmp_path / "fb"))}
    assert "Not graded: the grader failed on this submission, not because of your code; " \
           "your instructor has the details" in pages["alice"]
    assert "/home/instructor" not in pages["alice"] and "RuntimeError" not in pages["alice"]
    assert "Not graded: not a submission" in pages["bob.txt"]
