"""Where the sandbox cannot confine a submission, a grade refuses with one line (exit 2)
before any learner code runs, unless the instructor names the risk with the flag; then
every report says so. A check still runs, and says what it lacks.

The kernel here has Landlock, so "a kernel without it" is a copy of child.py whose
Landlock step reports that it could not be installed, as on such a kernel."""
import json
from pathlib import Path

import pytest

from conftest import ROOT, SECRET, without_landlock
from grader.cli import main
from grader.engine.layout import find_course
from grader.engine.sandbox import session
from grader.instructor.batch import run_batch
from grader.instructor.gradebook import open_gradebook

HONEST = ROOT / "reference" / "solutions" / "lesson1.py"
FLAG = "--dangerously-grade-without-confinement"
WITNESS = "/tmp/unconfined-witness-{}"


@pytest.fixture
def no_landlock(tmp_path, monkeypatch):
    child = tmp_path / "child.py"
    child.write_text(without_landlock(session.CHILD.read_text()))
    monkeypatch.setattr(session, "CHILD", child)
    monkeypatch.setenv("GRADER_SANDBOX", "process")
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    return secret


def witness_submission(tmp_path) -> Path:
    """Honest answers, and a file written at load: proof of whether learner code ran."""
    mark = WITNESS.format(tmp_path.name)
    # The name repeats in every session: a witness left by an earlier one (killed, or run
    # against a planted bug) is no evidence about this one.
    Path(mark).unlink(missing_ok=True)
    path = tmp_path / "alice.py"
    path.write_text(f"open({mark!r}, 'w').close()\n" + HONEST.read_text())
    return path


def test_a_grade_refuses_in_one_line_and_runs_no_learner_code(no_landlock, tmp_path, capsys):
    alice = witness_submission(tmp_path)
    assert main(["grade", "lesson1", str(alice), "--secret-file", str(no_landlock)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("grader: sandbox: refusing to grade")
    assert "Landlock" in err and "apt-get install bubblewrap" in err and FLAG in err
    assert not Path(WITNESS.format(tmp_path.name)).exists()


def test_the_grading_api_refuses_by_default(no_landlock, tmp_path):
    """What the CLI and the batch ask for, a caller of grade_submission gets unasked: a grade
    runs confined or not at all."""
    from grader.engine.pipeline import grade_submission
    from grader.engine.submission import load_submission
    alice = load_submission(witness_submission(tmp_path))
    try:
        with pytest.raises(session.Unconfined, match="refusing to grade"):
            grade_submission("lesson1", alice, find_course(str(ROOT)), mode="grade", secret=SECRET)
        assert not Path(WITNESS.format(tmp_path.name)).exists()
    finally:
        Path(WITNESS.format(tmp_path.name)).unlink(missing_ok=True)


def test_a_class_refuses_before_any_work(no_landlock, tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    witness_submission(tmp_path).rename(folder / "alice.py")
    with open_gradebook(str(tmp_path / "gradebook.db")) as book:
        with pytest.raises(session.Unconfined, match="refusing to grade"):
            run_batch("lesson1", folder, find_course(str(ROOT)), SECRET, book, jobs=1, progress=False)
        assert list(book.results()) == []
    assert not Path(WITNESS.format(tmp_path.name)).exists()


def test_the_flag_grades_and_every_report_says_so(no_landlock, tmp_path, capsys):
    alice = witness_submission(tmp_path)
    try:
        assert main(["grade", "lesson1", str(alice), "--secret-file", str(no_landlock), FLAG,
                     "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["score"] == report["max_score"]
        assert report["isolation"].startswith("NOT CONFINED (lacks Landlock")
        assert any(n.startswith("not confined:") and FLAG in n for n in report["notes"])
        assert main(["grade", "lesson1", str(alice), "--secret-file", str(no_landlock), FLAG]) == 0
        assert "note: not confined:" in capsys.readouterr().out
    finally:
        Path(WITNESS.format(tmp_path.name)).unlink(missing_ok=True)


def test_a_check_runs_and_says_what_it_lacks(no_landlock, tmp_path, capsys):
    assert main(["check", "lesson1", "--submission", str(HONEST), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["isolation"].startswith("NOT CONFINED (lacks Landlock")
    [note] = [n for n in report["notes"] if n.startswith("not confined:")]
    assert "lacks Landlock" in note and FLAG not in note       # a check needs no flag to run


def test_a_check_on_this_machine_is_confined(capsys, monkeypatch):
    """What the first README command gives on a fresh install here: confined, and no note."""
    monkeypatch.delenv("GRADER_SANDBOX", raising=False)
    assert main(["check", "lesson1", "--submission", str(HONEST), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "NOT CONFINED" not in report["isolation"] and report["notes"] == []


# ---- the learner's own tools: an experiment and a sheet run on their functions ------------------
STUB4 = ROOT / "assignments" / "lesson4" / "exercise.py"
SHEET = ROOT / "assignments" / "design_sheet.yaml"
OWN_RUNS = (["experiment", "prefix-ownership", "--submission", str(STUB4), "--set", "requests=50", "--json"],
            ["sheet", "run", str(SHEET), "--own", "--seeds", "1", "--json"])


def _unconfined_said(capsys, argv) -> tuple[list[str], dict]:
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    return [n for n in out.get("notes", []) if "not confined" in n], out


def test_an_experiment_and_a_sheet_run_on_the_learners_functions_say_what_they_lack(no_landlock, capsys):
    """They run, as a check does (the learner's own code, on their own machine), and say so:
    the stub is loaded, so learner code ran, even where nothing of it is called."""
    said, _ = _unconfined_said(capsys, OWN_RUNS[0])
    assert len(said) == 1 and said[0].startswith("not confined:") and "lacks Landlock" in said[0]
    _, out = _unconfined_said(capsys, OWN_RUNS[1])
    assert "Landlock" in out["unconfined"]
    assert main(OWN_RUNS[1][:-1]) == 0
    text = capsys.readouterr().out
    assert "note: not confined:" in text and "lacks Landlock" in text


def test_an_experiment_and_a_sheet_run_here_are_confined_and_say_nothing_of_it(capsys, monkeypatch):
    monkeypatch.delenv("GRADER_SANDBOX", raising=False)
    said, _ = _unconfined_said(capsys, OWN_RUNS[0])
    assert said == []
    _, out = _unconfined_said(capsys, OWN_RUNS[1])
    assert out["unconfined"] == ""
