"""The command line as people use it: exit codes, --json, one-line errors."""
import json

import pytest

from conftest import ROOT, json_error, run_grader

REF = str(ROOT / "reference" / "solutions" / "lesson1.py")


def run(*args, cwd=ROOT):
    return run_grader(*args, cwd=cwd, timeout=120)


def test_check_reference_json_full_marks():
    code, out, _ = run("check", "lesson1", "--submission", REF, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["score"] == report["max_score"] > 0
    for key in ("lesson", "criteria", "cases", "isolation", "grader_version", "duration_s",
                "submission_digest", "cost_model"):
        assert key in report
    c = report["criteria"][0]
    assert {"id", "title", "score", "max_score", "passed", "feedback"} <= set(c)


def test_python_dash_m_grader_is_the_grader_command():
    """Where the script is not on PATH (a venv not activated), the package runs as itself."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "grader", "check", "lesson1", "--submission", REF, "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["score"] == 10
    p = subprocess.run([sys.executable, "-m", "grader", "chek"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "invalid choice: 'chek'" in p.stderr and not p.stdout


def test_check_default_submission_is_the_stub_and_exits_zero():
    code, out, _ = run("check", "lesson1")
    assert code == 0
    assert "total 0 / 10" in out and "not implemented" in out


def test_grade_with_secret(tmp_path):
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    code, out, _ = run("grade", "lesson1", REF, "--secret-file", str(secret), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["mode"] == "grade" and report["score"] == report["max_score"]


@pytest.mark.parametrize("args,needle", [
    (("check", "lesson9"), "no such lesson"),
    (("check", "lesson1", "--submission", "nope.py"), "nope.py: no such submission file"),
    (("grade", "lesson1", REF, "--secret-file", "/nonexistent/secret"), "secret file not found"),
    (("grade", "lesson1", "submited/", "--secret-file", REF), "grader: submited/: no such class folder\n"),
])
def test_input_errors_exit_2_with_one_line(args, needle):
    code, out, err = run(*args)
    assert code == 2
    assert needle in err and err.count("\n") == 1 and out == ""
    # With --json the same error is also one object on stdout: a script parsing the
    # report gets something it can read, not an empty stream.
    code, out, err_json = run(*args, "--json")
    assert code == 2 and err_json == err
    assert set(json_error(out, err)) == {"error", "exit_code"}


def test_check_takes_the_submission_as_a_positional_path_too():
    code, out, _ = run("check", "lesson1", REF, "--json")
    assert code == 0 and json.loads(out)["score"] == json.loads(out)["max_score"] > 0
    # Both forms naming one file is not a conflict.
    code, out, _ = run("check", "lesson1", REF, "--submission", REF, "--json")
    assert code == 0 and json.loads(out)["score"] > 0


@pytest.mark.parametrize("command", [("check", "lesson1"), ("experiment", "goodput")])
def test_two_different_submissions_are_refused_not_one_chosen(command):
    code, out, err = run(*command, REF, "--submission", "other.py")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert REF in err and "--submission other.py" in err


def test_experiment_takes_the_submission_as_a_positional_path_too(tmp_path):
    # A file that does not exist proves the positional path is the one used.
    code, _, err = run("experiment", "goodput", str(tmp_path / "mine.py"))
    assert code == 2 and "mine.py" in err


def test_the_submission_may_come_after_a_flag(tmp_path):
    # `grader check lesson1 --json my.py` was refused as an unrecognized argument.
    code, out, err = run("check", "lesson1", "--json", REF)
    assert code == 0, err
    assert json.loads(out)["score"] == json.loads(out)["max_score"] > 0
    code, _, err = run("experiment", "goodput", "--set", "rates=1", str(tmp_path / "mine.py"))
    assert code == 2 and "mine.py" in err and "unrecognized" not in err
    # A second file is still a word too many, not a submission quietly chosen.
    code, _, err = run("check", "lesson1", REF, "--json", "extra.py")
    assert code == 2 and "unrecognized arguments: extra.py" in err


def test_empty_secret_is_refused(tmp_path):
    (tmp_path / "s").write_text("  \n")
    code, _, err = run("grade", "lesson1", REF, "--secret-file", str(tmp_path / "s"))
    assert code == 2 and "empty" in err


def test_grade_requires_a_secret():
    code, _, err = run("grade", "lesson1", REF)
    assert code == 2 and "--secret-file" in err


def test_version_and_help():
    code, out, _ = run("--version")
    assert code == 0 and out.startswith("grader ")
    code, out, _ = run("--help")
    assert code == 0 and "examples:" in out and "grader check lesson1" in out


def test_experiment_help_lists_every_experiment_and_setting_with_its_default():
    from grader.course import experiments
    code, out, _ = run("experiment", "--help")
    assert code == 0
    flat = " ".join(out.split())                      # wrapped lines read as one text
    for name in experiments.names():
        exp = experiments.find(name)
        assert f"{name} ({exp.lesson}): {exp.title}" in flat
        for knob in exp.knobs:
            default = ",".join(map(str, knob.default)) if isinstance(knob.default, tuple) else f"{knob.default:g}" \
                if isinstance(knob.default, float) else str(knob.default)
            assert f"{knob.name} (default {default}): {' '.join(knob.help.split())}" in flat, knob.name
    assert "budget (default 0.1): token-gap budget of the chunk rule (s); 1e-06 to 10" in flat
    assert "rules (default budget,per_token_only):" in flat and "one or more of budget, per_token_only" in flat


@pytest.mark.parametrize("args", [("check", "lesson1", REF), ("--help",)])
def test_a_reader_that_stops_early_gets_no_traceback(args):
    """grader check lesson1 | head: the pipe closes before the report is written. The exit
    is SIGPIPE's (141), with nothing on stderr."""
    import os
    import subprocess
    import sys
    read, write = os.pipe()
    os.close(read)                       # the reader is gone before the first byte
    try:
        p = subprocess.run([sys.executable, "-m", "grader.cli", *args], cwd=ROOT, stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert p.stderr == "", p.stderr
    # --help's text waits in stdout's buffer until the interpreter's exit, which stays quiet.
    assert p.returncode == (0 if args == ("--help",) else 141)


def test_an_interrupted_command_says_so_in_one_line_without_a_traceback(monkeypatch, capsys):
    from grader import cli

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_run", interrupted)
    assert cli.main(["grade", "lesson1", "class/", "--secret-file", "s"]) == 130
    err = capsys.readouterr().err
    assert err == ("\ngrader: interrupted. A class grade keeps every result it recorded: the same "
                   "command grades the rest.\n")
    # Under --force the same command grades every student again: "the rest" would mislead.
    assert cli.main(["grade", "lesson1", "class/", "--secret-file", "s", "--gradebook", "g.db", "--force"]) == 130
    assert capsys.readouterr().err == (
        "\ngrader: interrupted. A class grade keeps every result it recorded: --force grades every "
        "student again, so the same command starts over (without it, a run grades only the rest, and "
        "refuses while results of another grader or secret remain).\n")
    assert cli.main(["check", "lesson1"]) == 130
    assert capsys.readouterr().err == "\ngrader: interrupted.\n"


def test_grading_files_with_one_unreadable_grades_the_rest_and_exits_2(tmp_path):
    """The bad file is named on stderr and the others are graded, but a script must be able
    to tell that one was not: the exit code is an input error's."""
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    empty = tmp_path / "empty.py"
    empty.write_text("")
    code, out, err = run("grade", "lesson1", str(empty), REF, "--secret-file", str(secret), "--json")
    assert code == 2
    # One JSON line a file given, in their order: the one not graded says why.
    unread, graded = (json.loads(line) for line in out.splitlines())
    assert unread == {"submission": str(empty), "error": f"{empty}: the submission is empty", "exit_code": 2}
    assert graded["score"] == 10
    assert err == f"grader: {empty}: the submission is empty\n"


@pytest.mark.parametrize("command", [("export", "--format", "csv"), ("feedback", "--out", "fb"),
                                     ("report", "lesson1")])
def test_a_command_that_reads_the_gradebook_refuses_one_that_is_not_there(tmp_path, command):
    typo = tmp_path / "typo.db"
    code, out, err = run(*command, "--gradebook", str(typo), cwd=tmp_path)
    assert code == 2 and out == ""
    assert err == (f"grader: {typo}: no gradebook here: grade into it first (grader grade ... "
                   "--gradebook), or give the gradebook your grades went to\n")
    assert not typo.exists()


def test_grading_into_a_gradebook_whose_folder_is_missing_says_so(tmp_path):
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    where = tmp_path / "nope" / "gb.db"
    code, _, err = run("grade", "lesson1", REF, "--secret-file", str(secret), "--gradebook", str(where))
    assert code == 2
    assert err == f"grader: {where}: cannot make the gradebook: the folder {where.parent} does not exist\n"


@pytest.mark.parametrize("flag, instead", [
    (("--scheduler", "tcp://127.0.0.1:8786"), "are graded in this process, one after another"),
    (("--jobs", "2"), "are graded in this process, one after another"),
    (("--force",), "are always graded, and each replaces its gradebook result"),
    (("--quiet",), "show no progress bar: each prints its report as it is graded"),
])
def test_a_class_flag_with_files_named_one_by_one_is_refused_not_ignored(tmp_path, flag, instead):
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    db = tmp_path / "gb.db"
    code, out, err = run("grade", "lesson1", REF, "--secret-file", str(secret), "--gradebook", str(db), *flag)
    assert code == 2 and out == ""
    assert err == (f"grader: {flag[0]}: applies to a class folder (a folder of submissions); files named "
                   f"one by one {instead}\n")
    assert not db.exists()                      # refused before anything was graded or recorded


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_course_may_be_named_before_or_after_the_command(tmp_path, where):
    """Run from outside the course, --course finds it wherever it is typed; after the
    command it counts for nested commands too (sheet validate)."""
    course = ["--course", str(ROOT)]
    check = ["check", "lesson1", "--submission", REF, "--json"]
    code, out, err = run(*(course + check if where == "before" else check + course), cwd=tmp_path)
    assert code == 0, err
    report = json.loads(out)
    assert report["score"] == report["max_score"]
    sheet = ["sheet", "validate", str(ROOT / "assignments" / "design_sheet.yaml"), "--json"]
    code, out, err = run(*(course + sheet if where == "before" else sheet + course), cwd=tmp_path)
    assert json.loads(out)["file"].endswith("design_sheet.yaml"), err


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_course_named_is_the_one_read_wherever_it_is_typed(tmp_path, where):
    course, check = ["--course", str(tmp_path / "nowhere")], ["check", "lesson1"]
    code, _, err = run(*(course + check if where == "before" else check + course), cwd=tmp_path)
    assert code == 2 and f"{tmp_path / 'nowhere'}: not a course folder" in err, err


def test_the_learners_pages_example_report_is_what_check_prints(tmp_path):
    """docs/learners.md shows a report of lesson 1 whose pages_for goes through a float, as
    `grader check lesson1 my_work.py` prints it at 100 columns: every line it shows whole
    (a line with "..." is cut short on the page) is a line of the real report."""
    import os
    import re
    import subprocess
    import sys
    text = (ROOT / "docs" / "learners.md").read_text(encoding="utf-8")
    block = re.search(r"^```\n(lesson1: The request contract .*?)^```", text, re.S | re.M).group(1)
    source = (ROOT / "reference" / "solutions" / "lesson1.py").read_text(encoding="utf-8")
    exact = "return -(-tokens // page_tokens)"
    assert source.count(exact) == 1
    (tmp_path / "my_work.py").write_text(source.replace(exact, "import math; return math.ceil(tokens / page_tokens)"))
    p = subprocess.run([sys.executable, "-m", "grader.cli", "--course", str(ROOT), "check", "lesson1", "my_work.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "100"})
    assert p.returncode == 0, p.stderr
    printed = p.stdout.splitlines()
    shown = [line for line in block.splitlines() if "..." not in line]
    assert len(shown) >= 8 and [line for line in shown if line not in printed] == []


def test_two_files_of_one_student_into_a_gradebook_are_refused_before_any_grade(tmp_path):
    """Each would be recorded as the student's result, the later over the earlier, in
    silence; without a gradebook, or the same file twice, nothing is lost and both grade."""
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    for folder in ("v1", "late"):
        (tmp_path / folder / "alice" / "lesson1").mkdir(parents=True)
        (tmp_path / folder / "alice" / "lesson1" / "exercise.py").write_text(open(REF).read())
    first, second = (str(tmp_path / f / "alice" / "lesson1" / "exercise.py") for f in ("v1", "late"))
    book = tmp_path / "gb.db"
    code, out, err = run("grade", "lesson1", first, second, "--secret-file", str(secret),
                         "--gradebook", str(book), "--json")
    assert code == 2 and not book.exists()
    json_error(out, err)
    assert err == (f"grader: {second}: is alice's, as {first} is: the gradebook keeps one result a "
                   "student; grade the one to keep\n")
    code, out, _ = run("grade", "lesson1", first, second, "--secret-file", str(secret), "--json")
    assert code == 0 and len(out.splitlines()) == 2


def _alice_graded_then_bob(tmp_path, secret):
    """alice's and bob's files (the reference's), and a gradebook holding alice's grade
    under ``secret``: (bob, the gradebook)."""
    alice, bob = tmp_path / "alice.py", tmp_path / "bob.py"
    for path in (alice, bob):
        path.write_text(open(REF).read())
    book = tmp_path / "gb.db"
    code, _, err = run("grade", "lesson1", str(alice), "--secret-file", str(secret), "--gradebook", str(book))
    assert code == 0, err
    return bob, book


def test_files_graded_into_a_gradebook_by_other_grading_code_are_refused(tmp_path):
    """alice graded by an older grader (her result says so), then bob by this one: the
    lesson would hold the grades of two graders. Refused before bob is graded, naming the
    gradebook, alice and both graders."""
    import sqlite3
    from grader.engine.fingerprint import grading_version
    secret = tmp_path / "course.secret"
    secret.write_text("class of 2026, 4c1f9e27\n")
    bob, book = _alice_graded_then_bob(tmp_path, secret)
    with sqlite3.connect(book) as db:
        assert db.execute("UPDATE results SET grader_version = '0.1.0+older'").rowcount == 1
    code, out, err = run("grade", "lesson1", str(bob), "--secret-file", str(secret), "--gradebook", str(book))
    assert code == 2 and out == ""
    assert err.startswith(f"grader: sqlite:///{book}: 1 lesson1 result (alice) was graded by other "
                          f"grading code (0.1.0+older) than this grader's ({grading_version()}): ")
    with sqlite3.connect(book) as db:
        assert [r[0] for r in db.execute("SELECT student FROM results")] == ["alice"]


def test_files_graded_into_a_gradebook_on_other_hidden_cases_are_refused(tmp_path):
    """alice graded with one secret, then bob with another: the gradebook would hold one
    lesson graded on two sets of hidden cases, in silence. Refused before bob is graded,
    naming the secret file and whose results differ; with alice's secret, bob grades."""
    ours, typo = tmp_path / "course.secret", tmp_path / "old.secret"
    ours.write_text("class of 2026, 4c1f9e27\n")
    typo.write_text("class of 2025, 4c1f9e27\n")
    bob, book = _alice_graded_then_bob(tmp_path, ours)
    code, out, err = run("grade", "lesson1", str(bob), "--secret-file", str(typo), "--gradebook", str(book),
                         "--json")
    assert code == 2
    json_error(out, err)
    assert err.startswith(f"grader: {typo}: draws other hidden cases than 1 lesson1 result in the "
                          f"gradebook sqlite:///{book} (alice) was graded on: ")
    assert err.endswith("(grader gradebook forget STUDENT --lesson lesson1)\n") and err.count("\n") == 1
    code, out, err = run("export", "--format", "csv", "--gradebook", str(book), "--out", str(tmp_path / "g.csv"))
    assert code == 0, err
    assert "bob" not in (tmp_path / "g.csv").read_text()
    code, _, err = run("grade", "lesson1", str(bob), "--secret-file", str(ours), "--gradebook", str(book))
    assert code == 0, err


def test_a_file_whose_name_is_not_utf8_is_refused_before_grading_into_a_gradebook(tmp_path):
    """No gradebook can store such a name (it was a traceback after grading); without a
    gradebook it is graded as it is."""
    import os
    secret = tmp_path / "s"
    secret.write_text("class of 2026, 4c1f9e27\n")
    name = os.fsencode(tmp_path) + b"/caf\xe9.py"
    with open(name, "wb") as f:
        f.write(open(REF, "rb").read())
    path = os.fsdecode(name)
    book = tmp_path / "gb.db"
    code, out, err = run("grade", "lesson1", path, "--secret-file", str(secret), "--gradebook", str(book))
    shown = f"{tmp_path}/caf\\xe9.py"
    assert code == 2 and out == "" and not book.exists()
    assert err == (f"grader: {shown}: its name is not UTF-8 text ({shown}): rename it (the archive it "
                   "came from used another encoding), then grade again\n")
    code, out, _ = run("grade", "lesson1", path, "--secret-file", str(secret), "--json")
    assert code == 0 and json.loads(out)["score"] == 10
