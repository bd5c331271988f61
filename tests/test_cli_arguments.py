"""The command line's words as people type them: values that begin with a dash, empty words,
an option typed twice, before or after the command, `--`, and names a little off. Every
error names the argument and what was expected; none is argparse's "expected one argument"
to someone who typed the value. Command lines are read in this process (grader.cli._parse),
and run through main where the command's own check gives the error."""
import argparse
import re
from pathlib import Path

import pytest

from conftest import ROOT, json_error
from grader import __version__
from grader.cli import _parse, _parser, main
from grader.command_line import StoreOnce

SHEET = str(ROOT / "assignments" / "design_sheet.yaml")


def grader(capsys, *argv):
    """main(argv) as the shell runs it: (exit code, stdout, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv):
    """The words parsed, expected to be refused: stderr's last line."""
    with pytest.raises(SystemExit) as e:
        _parse(_parser(), list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def commands(parser=None, words=()):
    """Every parser of the command line, each with the words that reach it: (words, parser)."""
    parser = parser or _parser()
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, words + (name,))


def valued_options():
    """Every option of every command that takes a value: (words, parser, action)."""
    return [(words, parser, action) for words, parser in commands() for action in parser._actions
            if action.option_strings and action.nargs != 0]


def ids(cases):
    return [" ".join(("grader", *words, action.option_strings[-1])) for words, _, action in cases]


VALUED = valued_options()


def test_the_walk_reaches_the_options_that_take_numbers():
    found = set(ids(VALUED))
    assert {"grader sheet run --seeds", "grader grade --jobs", "grader experiment --set",
            "grader --course", "grader check --course", "grader sheet validate --course"} <= found


# ---- a value that begins with a dash and a digit -------------------------------------------
@pytest.mark.parametrize("words, parser, action", VALUED, ids=ids(VALUED))
@pytest.mark.parametrize("value", ["-3,4", "-1e3", "-.5", "-3"])
def test_a_negative_number_is_taken_as_the_options_value(capsys, words, parser, action, value):
    """argparse took `-3,4` and `-1e3` for unknown options and said the option "expected one
    argument" to someone who had typed it. Now the value reaches the option: its own check,
    or a required argument still missing, is what is said."""
    try:
        args, extra = parser.parse_known_args([action.option_strings[-1], value])
    except SystemExit:          # a required argument missing, or the value's own check
        err = capsys.readouterr().err
        assert "expected one argument" not in err and "error: " in err
    else:
        assert extra == [] and value in (getattr(args, action.dest), *getattr(args, action.dest))


@pytest.mark.parametrize("argv, expected", [
    (("sheet", "run", SHEET, "--seeds", "-3,4"), "grader: --seeds: a seed is an integer from 0 to 2147483647; got -3\n"),
    (("sheet", "run", SHEET, "--seeds", "-1.5"), "grader: --seeds: expected seeds like 4,5,6,7; got '-1.5'\n"),
    (("grade", "lesson1", "a.py", "--secret-file", "s", "--jobs", "-3"), "grader: --jobs: give at least 1 worker process\n"),
    (("experiment", "goodput", "--set", "-1"), "grader: --set -1: expected key=value\n"),
])
def test_a_negative_number_gets_the_commands_own_reason(capsys, argv, expected):
    code, out, err = grader(capsys, *argv)
    assert (code, out, err) == (2, "", expected)


def test_a_count_that_is_no_whole_number_says_so(capsys):
    assert refused(capsys, "grade", "lesson1", "a.py", "--secret-file", "s", "--jobs", "-1e3") == \
        "grader grade: error: argument --jobs: expected a whole number, got '-1e3'"


# ---- an empty word --------------------------------------------------------------------------
@pytest.mark.parametrize("words, parser, action", VALUED, ids=ids(VALUED))
def test_every_option_refuses_an_empty_value_naming_itself(capsys, words, parser, action):
    """`--submission ""` (an unset variable) fell back to the default in silence: the stub
    was graded, or the working directory graded as a class into the course's gradebook."""
    with pytest.raises(SystemExit):
        parser.parse_known_args([action.option_strings[-1], " "])
    err = capsys.readouterr().err
    wanted = action.help if action.help and action.help != argparse.SUPPRESS else "a value"
    assert f"argument {'/'.join(action.option_strings)}: is empty (a shell variable not set?); " \
           f"expected {wanted}\n" in err, err


@pytest.mark.parametrize("argv, named, wanted", [
    (("check", ""), "lesson", "the lesson: lesson1 .. lesson6"),
    (("check", "lesson1", ""), "SUBMISSION", "your exercise file (the same as --submission)"),
    (("check", "lesson1", "--json", ""), "SUBMISSION", "your exercise file (the same as --submission)"),
    (("check", "lesson1", "--json", "--", ""), "SUBMISSION", "your exercise file (the same as --submission)"),
    (("grade", "lesson1", "", "--secret-file", "s"), "paths", "submission files (.py or .ipynb), or ONE "
     "class folder: nbgrader's submitted/<student>/<lesson>/ layout or a flat folder of <student>.py/.ipynb"),
    (("gradebook", "forget", ""), "student", "the student as the gradebook names them (the folder's or "
     "file's name, as `grader export` lists them)"),
    (("sheet", "validate", ""), "file", "the design sheet, a YAML file"),
    (("experiment", "--json", ""), "name", "the experiment, e.g. prefill-deadline"),
    (("incident", "--student", " ", "--out", "o"), "--student", "the student's id, as their submission "
     "will be named"),
])
def test_an_empty_word_is_refused_naming_it_and_what_it_expects(capsys, argv, named, wanted):
    assert refused(capsys, *argv).endswith(f"error: argument {named}: is empty (a shell variable not set?); "
                                           f"expected {wanted}")


def test_an_empty_class_path_grades_nothing(capsys, tmp_path, monkeypatch):
    """`grader grade lesson1 "$CLASS"` with CLASS unset graded the working directory as a
    class into the gradebook (here one in the working directory: a failure leaves nothing in
    the course)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s").write_text("class of 2026, 4c1f9e27\n")
    code, out, err = grader(capsys, "--course", str(ROOT), "grade", "lesson1", "", "--secret-file", "s",
                            "--gradebook", "gb.db")
    assert code == 2 and out == "" and "argument paths: is empty" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


# ---- one option, two values -----------------------------------------------------------------
ONCE = [case for case in VALUED if isinstance(case[2], StoreOnce)]


@pytest.mark.parametrize("words, parser, action", ONCE, ids=ids(ONCE))
def test_an_option_given_two_values_is_refused(capsys, words, parser, action):
    """`--secret-file a.secret --secret-file b.secret` graded with b's in silence."""
    flag = action.option_strings[-1]
    first, second = (action.choices or ["1", "2"])[:2]
    with pytest.raises(SystemExit):
        parser.parse_known_args([flag, first, flag, second])
    err = capsys.readouterr().err
    assert f"argument {'/'.join(action.option_strings)}: given twice ({flag} {first} and {flag} {second}): " \
           "give it once" in err, err


def test_an_option_given_twice_with_one_value_is_no_conflict():
    args = _parse(_parser(), ["grade", "lesson1", "a.py", "--secret-file", "s", "--secret-file", "s"])
    assert args.secret_file == "s"


# ---- grader's own options, before or after the command --------------------------------------
COMMANDS = [words for words, _ in commands() if words]


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(w) for w in COMMANDS])
def test_every_command_takes_the_version_and_the_course_after_it(capsys, words):
    with pytest.raises(SystemExit) as e:
        _parse(_parser(), [*words, "--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"grader {__version__}\n"
    parser = dict(commands())[words]
    assert "--course" in parser.options()


@pytest.mark.parametrize("argv", [
    ("--course", "C", "check", "lesson1"), ("check", "lesson1", "--course", "C"),
    ("--course", "C", "sheet", "validate", "f.yaml"), ("sheet", "--course", "C", "validate", "f.yaml"),
    ("sheet", "validate", "f.yaml", "--course", "C"), ("gradebook", "forget", "bob", "--course", "C"),
    ("--course", "C", "experiment", "goodput"), ("experiment", "goodput", "--course", "C"),
])
def test_the_course_is_one_wherever_it_is_typed(argv):
    args = _parse(_parser(), list(argv))
    assert args.course == "C"
    assert [k for k in vars(args) if k.startswith("course")] == ["course"]


@pytest.mark.parametrize("argv", [
    ("--course", "A", "check", "lesson1", "--course", "B"),
    ("--course", "A", "sheet", "validate", "f.yaml", "--course", "B"),
    ("sheet", "--course", "A", "validate", "f.yaml", "--course", "B"),
])
def test_two_courses_are_refused_not_the_last_one_taken(capsys, argv):
    """The course after the command replaced the one before it, in silence."""
    assert refused(capsys, *argv) == "grader: error: argument --course: given twice (A and B): give the course once"


def test_one_course_named_two_ways_is_no_conflict(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = _parse(_parser(), ["--course", ".", "check", "lesson1", "--course", str(tmp_path)])
    assert args.course == str(tmp_path)


@pytest.mark.parametrize("argv, dest, meant", [
    (("--course", ".", "--course", "{here}", "check", "lesson1"), "course", "."),
    (("check", "lesson1", "--course", ".", "--course", "{here}/"), "course", "."),
    (("check", "lesson1", "--submission", "a.py", "--submission", "./a.py"), "submission", "a.py"),
    (("grade", "lesson1", "a.py", "--secret-file", "s", "--secret-file", "{here}/s"), "secret_file", "s"),
])
def test_one_path_given_twice_spelled_two_ways_is_no_conflict(tmp_path, monkeypatch, argv, dest, meant):
    """`--course . --course "$PWD"` was refused as two values, though docs/learners.md refuses
    only two different folders, and the same two typed before and after the command are one."""
    monkeypatch.chdir(tmp_path)
    args = _parse(_parser(), [w.format(here=tmp_path) for w in argv])
    assert Path(getattr(args, dest)).resolve() == (tmp_path / meant).resolve()


def test_two_paths_given_for_one_option_are_still_refused(capsys):
    assert refused(capsys, "check", "lesson1", "--submission", "a.py", "--submission", "b/a.py").endswith(
        "argument --submission: given twice (--submission a.py and --submission b/a.py): give it once")
    assert refused(capsys, "--course", "A", "--course", "A/B", "check", "lesson1").endswith(
        "argument --course: given twice (--course A and --course A/B): give it once")
    # The one typed two ways is not named as the other one: B is.
    assert refused(capsys, "--course", "A", "sheet", "--course", "./A", "validate", "f.yaml", "--course", "B") == \
        "grader: error: argument --course: given twice (A and B): give the course once"


@pytest.mark.parametrize("place", ["before", "after", "after --help"])
def test_the_experiments_help_lists_the_lessons_of_the_course_named_anywhere(capsys, tmp_path, place):
    """`grader --course DIR experiment --help` listed the experiments of the course found from
    the working directory (here every lesson), not DIR's (lessons 1 and 3)."""
    from grader.course import experiments
    (tmp_path / "rubrics").mkdir()
    for lesson in ("lesson1", "lesson3"):
        (tmp_path / "rubrics" / f"{lesson}.yaml").write_text("version: 1\n")
    course = ["--course", str(tmp_path)]
    argv = {"before": [*course, "experiment", "--help"], "after": ["experiment", *course, "--help"],
            "after --help": ["experiment", "--help", *course]}[place]
    code, out, _ = grader(capsys, *argv)
    assert code == 0
    for name in experiments.names():
        lesson = experiments.find(name).lesson
        absent = "" if lesson in ("lesson1", "lesson3") else ", not in this edition"
        assert f"  {name} ({lesson}{absent}): " in out


@pytest.mark.parametrize("argv, flag, outer, command", [
    (("--json", "check", "lesson1"), "--json", "grader", "grader check"),
    (("--json", "sheet", "validate", "s.yaml"), "--json", "grader", "grader sheet validate"),
    (("sheet", "--json", "validate", "s.yaml"), "--json", "grader sheet", "grader sheet validate"),
    (("gradebook", "--dry-run", "forget", "bob"), "--dry-run", "grader gradebook", "grader gradebook forget"),
])
def test_a_commands_option_before_the_command_says_where_it_goes(capsys, argv, flag, outer, command):
    """`grader sheet --json validate` was told that --json came after `--`, or was unrecognized."""
    assert refused(capsys, *argv) == (f"grader: error: unrecognized arguments: {flag} ({flag} is not an "
                                      f"option of {outer}: it goes after {command.split()[-1]}, as in: "
                                      f"{command} ... {flag})")


def test_a_flag_given_a_value_says_it_takes_none(capsys):
    assert refused(capsys, "check", "lesson1", "--json=yes").endswith(
        "argument --json: ignored explicit argument 'yes' (it is a flag: it takes no value)")


def test_a_missing_command_lists_the_commands(capsys):
    assert refused(capsys, "sheet").endswith("the following arguments are required: action (one of: validate, run)")
    assert refused(capsys, "gradebook", "--course", "C").endswith("required: action (one of: forget)")
    assert refused(capsys).startswith("grader: error: the following arguments are required: command (one of: "
                                      "check, grade, ")


def test_a_mistyped_option_names_the_one_meant(capsys):
    assert refused(capsys, "check", "lesson1", "--jsn").endswith(
        "unrecognized arguments: --jsn (did you mean --json?)")
    # Only a close one: --json is no typo of export's --lesson.
    assert refused(capsys, "export", "--json", "--format", "csv").endswith(
        "unrecognized arguments: --json (grader export has no option --json: grader export --help lists them)")
    assert refused(capsys, "check", "lesson1", "--verbose").endswith(
        "unrecognized arguments: --verbose (grader check has no option --verbose: grader check --help lists them)")
    assert refused(capsys, "check", "lesson1", "--json", "-draft.py").endswith(
        "unrecognized arguments: -draft.py (-draft.py was read as an option; a value that begins with - goes "
        "after --, as in: -- -draft.py)")


# ---- a value that begins with a dash, and `--` ----------------------------------------------
def test_a_value_read_as_an_option_says_how_to_give_it(capsys):
    assert refused(capsys, "incident", "--student", "-alice", "--out", "o").endswith(
        "argument --student: expected one argument (-alice was read as an option; if it is the value, "
        "write --student=-alice)")
    assert refused(capsys, "gradebook", "forget", "-bob").endswith(
        "the following arguments are required: student (-bob was read as an option; a value that begins "
        "with - goes after --, as in: -- -bob)")
    assert refused(capsys, "sheet", "run", SHEET, "--seeds").endswith(
        "argument --seeds: expected one argument (nothing follows --seeds: give its value after it)")
    assert _parse(_parser(), ["gradebook", "forget", "--", "-bob"]).student == "-bob"
    assert _parse(_parser(), ["incident", "--student=-alice", "--out", "o"]).student == "-alice"


@pytest.mark.parametrize("argv, submission, as_json", [
    (("--", "check", "lesson1", "--json"), None, True),
    (("check", "lesson1", "--json", "--"), None, True),
    (("check", "lesson1", "--json", "--", "my.py"), "my.py", True),
    (("check", "lesson1", "--json", "--", "-my.py"), "-my.py", True),
    (("check", "lesson1", "--", "-my.py"), "-my.py", False),
])
def test_a_double_dash_ends_the_options_wherever_it_is(argv, submission, as_json):
    """Before the command argparse took `--` for its name; after the options it called it an
    unrecognized argument, and the file after it too."""
    args = _parse(_parser(), list(argv))
    assert (args.command, args.lesson, args.submission_path, args.json) == ("check", "lesson1", submission, as_json)


def test_an_option_after_a_double_dash_is_a_value_and_said_to_be(capsys):
    assert refused(capsys, "gradebook", "forget", "--", "-bob", "--dry-run").endswith(
        "unrecognized arguments: --dry-run (--dry-run came after --, which makes every word after it a "
        "value: give options before --)")


@pytest.mark.parametrize("argv", [("check", "lesson1", "--", "--json"), ("check", "--", "--json"),
                                  ("experiment", "goodput", "--", "--json"), ("experiment", "--", "--json"),
                                  ("grade", "lesson1", "--secret-file", "s", "--", "a.py", "--json")])
def test_an_option_taken_for_the_file_after_a_double_dash_is_said_to_be(capsys, argv):
    """docs/learners.md: the error says so when an option after `--` was taken for a value;
    `grader check lesson1 -- --json` said only "--json: no such submission file"."""
    assert refused(capsys, *argv).endswith(
        "--json: came after --, which makes every word after it a value: give options before --")


def test_a_required_option_typed_after_a_double_dash_is_said_to_be_a_value(capsys):
    """`grader grade lesson1 -- -a.py --secret-file s` was told that -a.py, the one word it
    had put after `--` on purpose, "was read as an option"."""
    for secret in (["--secret-file", "s"], ["--secret-file=s"]):
        assert refused(capsys, "grade", "lesson1", "--", "-a.py", *secret).endswith(
            "the following arguments are required: --secret-file (--secret-file came after --, which "
            "makes every word after it a value: give options before --)")
    assert refused(capsys, "grade", "lesson1", "--", "-a.py").endswith(
        "the following arguments are required: --secret-file")


def test_files_to_grade_may_come_after_a_flag():
    """`grader grade lesson1 alice.py --secret-file s bob.py`: bob.py was "unrecognized"."""
    args = _parse(_parser(), ["grade", "lesson1", "alice.py", "--secret-file", "s", "bob.py", "--json", "--",
                              "-carol.py"])
    assert args.paths == ["alice.py", "bob.py", "-carol.py"] and args.json


def outside_brackets(usage: str, word: str) -> bool:
    """Whether ``word`` stands in ``usage`` outside every [...]: shown as required."""
    for found in re.finditer(rf"(?<![\w-]){re.escape(word)}(?![\w-])", usage):
        before = usage[:found.start()]
        if before.count("[") == before.count("]"):
            return True
    return False


@pytest.mark.parametrize("words, needed", [
    (("experiment",), {"name"}), (("check",), {"lesson"}), (("sheet", "validate"), {"file"}),
    (("sheet", "run"), {"file"}), (("gradebook", "forget"), {"student"}),
    (("grade",), {"lesson", "paths", "--secret-file"}), (("report",), {"lesson"}),
    (("gradescope",), {"lesson", "--secret-file"}), (("export",), {"--format"}), (("release",), {"--out"}),
])
def test_what_a_command_requires_its_usage_shows_as_required(capsys, words, needed):
    """`grader experiment` said that name is required under a usage that showed `[name]`,
    which means it may be left out."""
    with pytest.raises(SystemExit):
        _parse(_parser(), list(words))
    err = capsys.readouterr().err
    usage, said = err.split(f"{' '.join(('grader', *words))}: error: ")
    assert set(said.split(": ", 1)[1].split(" (")[0].strip().split(", ")) == needed
    assert [w for w in sorted(needed) if not outside_brackets(usage, w)] == []


def test_the_experiments_name_may_come_after_a_flag(capsys):
    code, out, err = grader(capsys, "experiment", "--json", "nosuch")
    assert code == 2 and err.startswith("grader: nosuch: no such experiment (known: ")
    json_error(out, err)
    assert refused(capsys, "experiment", "--json").endswith("the following arguments are required: name")


# ---- names and paths a little off ------------------------------------------------------------
@pytest.mark.parametrize("typed, meant", [("Lesson3", "lesson3"), ("lesson03", "lesson3"),
                                          ("lesson 3", "lesson3"), ("L3", "lesson3"), ("3", "lesson3")])
def test_a_lesson_name_a_little_off_names_the_lesson_meant(capsys, typed, meant):
    code, out, err = grader(capsys, "check", typed)
    assert (code, out) == (2, "")
    assert err == (f"grader: {typed}: no such lesson in {ROOT} (lessons here: lesson1, lesson2, lesson3, "
                   f"lesson4, lesson5, lesson6); did you mean {meant}?\n")


def test_a_release_of_a_lesson_a_little_off_names_the_lesson_meant(capsys, tmp_path):
    code, out, err = grader(capsys, "release", "--out", str(tmp_path / "ed"), "--lessons", "lesson1,L02")
    assert (code, out) == (2, "") and not (tmp_path / "ed").exists()
    assert err == ("grader: L02: no such lesson (known: lesson1, lesson2, lesson3, lesson4, lesson5, lesson6); "
                   "did you mean lesson2?\n")


def test_a_lesson_the_course_does_not_hold_gets_no_guess(capsys):
    code, _, err = grader(capsys, "check", "lesson9")
    assert code == 2 and "did you mean" not in err


def test_an_experiments_submission_that_is_a_folder_says_so(capsys, tmp_path):
    code, out, err = grader(capsys, "experiment", "goodput", "--submission", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == (f"grader: {tmp_path}: is a folder, not a file (--submission: your exercise file of "
                   "lesson5, a .py or .ipynb)\n")


def test_a_course_that_is_a_file_says_so(capsys, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    code, _, err = grader(capsys, "--course", str(notes), "check", "lesson1")
    assert code == 2 and err == (f"grader: {notes}: not a course folder (is a file): --course names the "
                                 "folder holding rubrics/ and assignments/\n")


def test_an_experiments_submission_that_is_a_device_says_so(capsys):
    code, out, err = grader(capsys, "experiment", "goodput", "--submission", "/dev/zero")
    assert (code, out) == (2, "")
    assert err == ("grader: /dev/zero: is not a regular file (a pipe, a device or a socket): not read "
                   "(--submission: your exercise file of lesson5, a .py or .ipynb)\n")
