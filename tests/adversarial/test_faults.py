"""Faults that hung the grader, leaked a file into feedback or ended in a traceback: each
is now held (graded, with the problem as feedback) or refused with one line, exit 2, and
nothing already done is lost. Course files are broken in a copy of the course."""
import json
import os
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import ROOT, SECRET, refused
from grader.cli import main
from grader.engine.layout import find_course
from grader.instructor import gradebook as gradebook_module
from grader.instructor.batch import run_batch
from grader.instructor.gradebook import GradebookWriteError, open_gradebook

REF = ROOT / "reference" / "solutions"
LESSON6 = REF / "lesson6"
COURSE = find_course(str(ROOT))


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "course.secret"
    path.write_bytes(SECRET)
    return path


def lesson6_folder(where: Path) -> Path:
    where.mkdir(parents=True)
    for name in ("diagnosis.yaml", "design_sheet.yaml"):
        shutil.copy(LESSON6 / name, where / name)
    return where


# ---------------------------------------------------------------------------- no hang

def test_a_fifo_diagnosis_is_feedback_not_a_hang(tmp_path, capsys):
    folder = lesson6_folder(tmp_path / "sub")
    (folder / "diagnosis.yaml").unlink()
    os.mkfifo(folder / "diagnosis.yaml")          # opening it to read would wait forever
    assert main(["check", "lesson6", "--submission", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any("diagnosis.yaml is not a regular file" in n for n in report["notes"]), report["notes"]


def test_a_fifo_in_a_class_is_that_students_row(tmp_path, secret, capsys):
    root = tmp_path / "class"
    lesson6_folder(root / "alice")
    bob = lesson6_folder(root / "bob")
    (bob / "diagnosis.yaml").unlink()
    os.mkfifo(bob / "diagnosis.yaml")
    book = tmp_path / "gb.db"
    assert main(["grade", "lesson6", str(root), "--secret-file", str(secret), "--gradebook",
                 str(book), "--quiet"]) == 0
    capsys.readouterr()
    with open_gradebook(str(book)) as gb:
        graded = {r.student: r for r in gb.results()}
    assert set(graded) == {"alice", "bob"} and graded["bob"].status == "graded"


def test_a_hard_link_to_the_secret_is_not_read(tmp_path, secret, capsys):
    folder = lesson6_folder(tmp_path / "sub")
    (folder / "diagnosis.yaml").unlink()
    os.link(secret, folder / "diagnosis.yaml")    # the same file under a student's name
    assert main(["check", "lesson6", "--submission", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    assert SECRET.decode() not in out and "is a hard link" in out
    code = tmp_path / "alice.py"
    os.link(secret, code)
    err = refused(capsys, "grade", "lesson1", code, "--secret-file", secret)
    assert "is a hard link" in err and SECRET.decode() not in err


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_secret_that_is_no_small_regular_file_is_refused(tmp_path, capsys, kind):
    path = tmp_path / "course.secret"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    else:
        with open(path, "wb") as f:
            f.truncate(4 << 30)                    # sparse: 4 GiB on paper
    err = refused(capsys, "grade", "lesson1", REF / "lesson1.py", "--secret-file", path)
    assert str(path) in err and ("not a regular file" in err or "larger than" in err), err


# ---------------------------------------------------------------------------- one line, exit 2

@pytest.mark.parametrize("value", ["2001-02-30", "1" * 5000])
def test_yaml_values_pyyaml_cannot_build_are_one_line(course, tmp_path, capsys, value):
    rubric = course / "rubrics" / "lesson1.yaml"
    rubric.write_text(rubric.read_text() + f"released: {value}\n")
    err = refused(capsys, "--course", course, "check", "lesson1", "--submission", REF / "lesson1.py")
    assert f"{rubric}: not valid YAML (a value that cannot be read" in err
    probes = course / "assignments" / "lesson2" / "probes.yaml"
    probes.write_text(probes.read_text() + f"\nwhen: {value}\n")
    err = refused(capsys, "--course", course, "check", "lesson2", "--submission", REF / "lesson2.py")
    assert f"{probes}: not valid YAML" in err
    sheet = tmp_path / "sheet.yaml"
    sheet.write_text((ROOT / "assignments" / "design_sheet.yaml").read_text() + f"\nwhen: {value}\n")
    code = main(["sheet", "validate", str(sheet)])
    out, err = capsys.readouterr()
    assert code == 2 and "not valid YAML (a value that cannot be read" in out, (out, err)
    folder = lesson6_folder(tmp_path / "sub")
    (folder / "diagnosis.yaml").write_text((LESSON6 / "diagnosis.yaml").read_text() + f"\nwhen: {value}\n")
    assert main(["check", "lesson6", "--submission", str(folder), "--json"]) == 0
    assert "a value that cannot be read" in capsys.readouterr().out


@pytest.mark.parametrize("notebook,message", [
    ('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}", "cells: not a readable Jupyter notebook"),
    (json.dumps({"cells": [{"cell_type": "code", "source": [1, 2]}]}),
     "cells[0].source: expected text or a list of strings, got list"),
    (json.dumps({"cells": [{"cell_type": "code", "source": {"a": 1}}]}),
     "cells[0].source: expected text or a list of strings, got dict"),
])
def test_a_hostile_notebook_is_one_line(tmp_path, capsys, notebook, message):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook)
    assert f"{path}: {message}" in refused(capsys, "check", "lesson1", "--submission", path)


def test_a_probe_field_of_the_wrong_shape_names_it(course, capsys):
    probes = course / "assignments" / "lesson4" / "probes.yaml"
    text = probes.read_text()
    start = text.index("  separators:")
    end = text.index("\n", start)
    probes.write_text(text[:start] + "  separators: 42" + text[end:])
    err = refused(capsys, "--course", course, "check", "lesson4", "--submission", REF / "lesson4.py")
    assert f"{probes}: prefix_key.separators: expected a list of strs, got int" in err


@pytest.mark.parametrize("where", ["folder", "proc"])
def test_a_plot_that_cannot_be_written_is_one_line(tmp_path, capsys, where):
    target = tmp_path / "plot.png" if where == "folder" else Path("/proc/plot.png")
    if where == "folder":
        target.mkdir()
    err = refused(capsys, "experiment", "prefill-deadline", "--plot", target)
    assert str(target) in err and "cannot write the plot" in err


@pytest.mark.parametrize("url,message", [
    ("garbage", "not a gradebook: give a SQLite file ending in .db"),
    ("sqlite://", "an in-memory SQLite gradebook would lose every result"),
    ("sqlite:///:memory:", "an in-memory SQLite gradebook would lose every result"),
])
def test_a_gradebook_that_would_lose_results_is_refused(tmp_path, capsys, secret, url, message,
                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(REF / "lesson1.py", folder / "alice.py")
    err = refused(capsys, "grade", "lesson1", folder, "--secret-file", secret, "--gradebook", url)
    assert f"{url}: {message}" in err
    assert not (tmp_path / "garbage").exists()


def test_jobs_zero_is_refused_for_single_files_too(capsys, secret):
    err = refused(capsys, "grade", "lesson1", REF / "lesson1.py", "--secret-file", secret, "--jobs", "0")
    assert "--jobs: give at least 1 worker process" in err


def test_a_full_disk_mid_class_stops_cleanly_and_keeps_what_was_written(tmp_path, monkeypatch):
    """SQLite's max_page_count makes the gradebook 'full' after a few results, as a full
    disk would: the batch stops with one line, and every result written stays."""
    folder = tmp_path / "class"
    folder.mkdir()
    for i in range(6):
        shutil.copy(REF / "lesson1.py", folder / f"s{i}.py")
    path = tmp_path / "gb.db"
    with open_gradebook(str(path)) as book, book.engine.connect() as conn:   # tables, then the cap
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()
    setup = gradebook_module._sqlite_setup

    def capped(engine, read_only):
        setup(engine, read_only)

        @sa.event.listens_for(engine, "connect")
        def cap(dbapi_conn, _record):
            dbapi_conn.execute(f"PRAGMA max_page_count = {pages + 6}")
    monkeypatch.setattr(gradebook_module, "_sqlite_setup", capped)
    with open_gradebook(str(path)) as book:
        with pytest.raises(GradebookWriteError) as stopped:
            run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        kept = [r.student for r in book.results() if r.status == "graded"]
    message = str(stopped.value)
    assert "full" in message and "every result written is kept" in message and "\n" not in message
    assert 0 < len(kept) < 6
    monkeypatch.setattr(gradebook_module, "_sqlite_setup", setup)    # space again: the rest
    with open_gradebook(str(path)) as book:
        again = run_batch("lesson1", folder, COURSE, SECRET, book, jobs=1, progress=False)
        assert again.skipped == len(kept) and again.graded == 6 - len(kept)
