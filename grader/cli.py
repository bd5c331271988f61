"""The ``grader`` command: a thin layer over the pipeline.

Exit codes: 0 when grading ran (whatever the score), 2 for a usage or input error
(one line naming the file or field), 1 if the grader itself failed.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from grader import __version__
from grader.command_line import AFTER_DOUBLE_DASH, Formatter, Parser, one_value, whole_number
from grader.engine.layout import find_course
from grader.engine.edition import learner_edition
from grader.engine.errors import InputError
from grader.engine.report import render
from grader.engine.sandbox.session import UNCONFINED_FLAG, spare
from grader.engine.secret import SecretError, load_secret
from grader.engine.text import first_few, plural, terminal
from reference.specs import SpecError
from reference.units import UnitError
from reference.workload import WorkloadError

EXAMPLES = """examples:
  grader check lesson1                          check assignments/lesson1/exercise.py (public cases)
  grader check lesson1 my.ipynb --json           the same as --submission my.ipynb
  grader grade lesson1 alice.py bob.py --secret-file course.secret --json
  grader grade lesson1 submissions/ --secret-file course.secret --jobs 4   a whole class, into the gradebook
  grader export --format csv --out grades.csv      (also nbgrader); grader feedback --out fb/
  grader report lesson1 --out report/              the class at a glance: report/index.html
  grader gradebook forget notes --dry-run          what removing a stray "student" would remove
  grader gradescope lesson1 --secret-file course.secret --out lesson1-autograder.zip
  grader release --out learner-edition/            the copy learners get: no solutions, no secrets
  grader experiment prefill-deadline --set budget=0.05 --plot deadline.png
  grader sheet validate design_sheet.yaml; grader sheet run design_sheet.yaml --baseline R42.yaml
  grader incident --student alice --secret-file course.secret --out incidents/alice/
"""

INPUT_ERRORS = (InputError, SecretError, SpecError, UnitError, WorkloadError)
INSTRUCTOR_EXAMPLES = ("grader grade", "grader export", "grader release", "grader feedback",
                       "grader incident", "grader gradescope", "grader report", "grader gradebook")


def _parser() -> Parser:
    learner = learner_edition() is not None
    examples = "\n".join(l for l in EXAMPLES.splitlines()
                          if not learner or not l.lstrip().startswith(INSTRUCTOR_EXAMPLES)) + "\n"
    p = Parser(prog="grader", epilog=examples, formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Grade exercises of 'Serving under pressure: from "
                           "admission to release' against the reference worker.")
    p.add_argument("--version", action="version", version=f"grader {__version__}")
    p.add_argument("--course", help=COURSE_HELP)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="grade your exercise on the public cases (seconds)",
                       epilog="example: grader check lesson1 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("lesson", help=LESSON_HELP)
    c.add_argument("submission_path", nargs="?", metavar="SUBMISSION",
                   help="your exercise file (the same as --submission)")
    c.add_argument("--submission", help="a .py or .ipynb file (default: assignments/LESSON/exercise.py); "
                                        "lesson6: a folder (default: assignments/lesson6/submission/)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")

    if not learner:
        _instructor_commands(sub)
    _course_anywhere(_sheet_commands(sub), COURSE_AFTER_ACTION)          # sheet validate / run

    e = sub.add_parser("experiment", help="run a course experiment on the worker (seconds)",
                       epilog="examples:\n  grader experiment prefill-deadline --set prompt=16384 "
                              "--plot deadline.png\n  grader experiment goodput "
                              "--submission assignments/lesson5/exercise.py",
                       formatter_class=Formatter, add_help=False)
    e.add_argument("-h", "--help", dest="experiment_help", action="store_true",
                   help="show this help, with every experiment and its settings, and exit")
    # Read as optional: --help is answered once the whole line is read (its --course too),
    # and _parse asks for the name when help was not asked for.
    e.add_needed("name", help="the experiment, e.g. prefill-deadline")
    e.add_argument("submission_path", nargs="?", metavar="SUBMISSION",
                   help="the exercise file (the same as --submission)")
    e.add_argument("--submission", help="the exercise file whose functions it plugs in (default: "
                   + ("assignments/LESSON/exercise.py of the experiment's lesson" if learner else
                      "the reference's; the learner edition: assignments/LESSON/exercise.py") + ")")
    e.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                   help="change one constraint (repeatable); unknown keys list the known ones")
    e.add_argument("--plot", metavar="FILE.png", help="also draw the result into a PNG file")
    e.add_argument("--json", action="store_true", help="print the table as JSON")
    _course_anywhere(sub, COURSE_AFTER_COMMAND)
    return p


COURSE_HELP = "the course folder (default: found from the working directory)"
LESSON_HELP = "the lesson: lesson1 .. lesson6"
SHEET_HELP = "the design sheet, a YAML file"
# --course is read at each level under its own name: argparse parses a command's words into
# a namespace of their own and copies it over the one before, so one name would let the
# value typed after the command replace the one typed before it in silence. _parse makes
# them one (args.course), refusing two different folders.
COURSE_AFTER_COMMAND, COURSE_AFTER_ACTION = "course_after_command", "course_after_action"


def _course_anywhere(sub, dest: str) -> None:
    """grader's own options after the command too (`grader check lesson1 --course ~/course`,
    `grader check --version`), as people type them, meaning what they mean before it."""
    for parser in sub.choices.values():
        parser.add_argument("--course", dest=dest, metavar="COURSE", default=argparse.SUPPRESS,
                            help=COURSE_HELP)
        parser.add_argument("--version", action="version", version=f"grader {__version__}",
                            help=argparse.SUPPRESS)
        # The innermost command's parser (sheet run's, not sheet's), for _parse's messages.
        parser.set_defaults(command_parser=parser)


def _experiment_help(parser, course: str | None) -> None:
    """`grader experiment --help` lists the experiments and their settings, for the course
    named wherever --course was typed. They are found only when asked for (importing them
    runs the reference worker's imports), so every other command, and its help, stays quick."""
    from grader.course.experiments import describe      # every edition ships them
    parser.epilog = f"{describe(_lessons_held(course))}\n\n{parser.epilog}"
    parser.print_help()
    parser.exit()


def _lessons_held(explicit: str | None) -> list[str] | None:
    """The lessons of the course the command would run in, for help that names only what it
    can run; None where no course is found (the help is then the whole list)."""
    try:
        return find_course(explicit).lessons()
    except InputError:
        return None


def _instructor_commands(sub) -> None:
    """grade, export, feedback, release: not in the learner edition (they need the secret,
    the hidden families or the reference solutions)."""
    g = sub.add_parser("grade", help="grade submissions on public and hidden cases (instructors)",
                       epilog="examples:\n  grader grade lesson1 alice.py --secret-file course.secret\n"
                              "  grader grade lesson1 submissions/ --secret-file course.secret --jobs 4",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("lesson", help=LESSON_HELP)
    g.add_argument("paths", nargs="+",
                   help="submission files (.py or .ipynb), or ONE class folder: nbgrader's "
                        "submitted/<student>/<lesson>/ layout or a flat folder of <student>.py/.ipynb")
    g.add_argument("--secret-file", required=True,
                   help="the instructor secret that draws the hidden cases")
    g.add_argument("--json", action="store_true",
                   help="print each report as one JSON object per line (a class: the summary)")
    g.add_argument("--gradebook", metavar="URL",
                   help="SQLAlchemy URL or SQLite file (default for a class: gradebook.db in the course)")
    g.add_argument("--jobs", type=whole_number, metavar="N", help="worker processes (default: one per core)")
    g.add_argument("--force", action="store_true", help="regrade what the gradebook already has")
    g.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="grade on a Dask distributed cluster; this process alone writes the gradebook")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.add_argument(UNCONFINED_FLAG, dest="unconfined_ok", action="store_true",
                   help="grade even where the sandbox cannot confine submissions (no bubblewrap "
                        "as root, no Landlock): a submission could then read the secret, the "
                        "hidden cases and the gradebook; every report says so")

    def gradebook_options(parser):
        parser.add_argument("--gradebook", metavar="URL",
                            help="SQLAlchemy URL or SQLite file (default: gradebook.db in the course)")
        parser.add_argument("--lesson", dest="only_lesson", metavar="LESSON",
                            help="only this lesson (default: every lesson in the gradebook)")

    e = sub.add_parser("export", help="export the gradebook: csv or nbgrader (instructors)",
                       epilog="examples:\n  grader export --format csv --out grades.csv\n"
                              "  grader export --format nbgrader --out nbgrader-course/gradebook.db\n\n"
                              "Gradescope grades in its own container: build its autograder with "
                              "`grader gradescope LESSON`.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    gradebook_options(e)
    e.add_argument("--format", required=True, choices=("csv", "nbgrader"), help="csv or nbgrader")
    e.add_argument("--out", metavar="PATH",
                   help="csv: a file (default: stdout); "
                        "nbgrader: its gradebook file or URL (default nbgrader/gradebook.db)")

    b = sub.add_parser("gradebook", help="change the gradebook by hand: forget a student (instructors)",
                       epilog="examples:\n  grader gradebook forget notes --dry-run\n"
                              "  grader gradebook forget bob --lesson lesson2 --gradebook grades.db",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    edits = b.add_subparsers(dest="action", required=True)
    fg = edits.add_parser("forget", help="remove a student's results (a folder graded by mistake)",
                          epilog="It prints each result it removes; --dry-run prints them and "
                                 "removes nothing.")
    fg.add_argument("student", help="the student as the gradebook names them (the folder's or "
                                    "file's name, as `grader export` lists them)")
    gradebook_options(fg)
    fg.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    _course_anywhere(edits, COURSE_AFTER_ACTION)

    f = sub.add_parser("feedback", help="write one feedback file per student (instructors)",
                       epilog="example: grader feedback --out feedback/ --format html")
    gradebook_options(f)
    f.add_argument("--out", metavar="DIR", default="feedback", help="a folder (default: feedback/)")
    f.add_argument("--format", choices=("md", "html"), default="md", help="md or html (default: md)")
    f.add_argument("--public-only", action="store_true",
                   help="for pages sent before grades are published: every criterion's feedback as "
                        "measured on the public cases alone, which names no hidden input (points stay)")

    rp = sub.add_parser("report", help="a class's results as an HTML page with plots (instructors)",
                        epilog="example: grader report lesson1 --out report/   (then open report/index.html)",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("lesson", help=LESSON_HELP)
    rp.add_argument("--gradebook", metavar="URL",
                    help="SQLAlchemy URL or SQLite file (default: gradebook.db in the course)")
    rp.add_argument("--out", metavar="DIR",
                    help="the folder for index.html and its PNGs (default: report/, or none "
                         "with --json)")
    rp.add_argument("--json", action="store_true",
                    help="print the report's numbers as JSON (the page too with --out)")

    i = sub.add_parser("incident", help="write a student's lesson 6 incident bundle (instructors)",
                       epilog="examples:\n  grader incident --student alice --secret-file course.secret "
                              "--out incidents/alice/\n  grader incident --demo --out assignments/lesson6/demo/"
                              "\n  grader incident --practice p1 --out assignments/lesson6/practice/p1/",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    who = i.add_mutually_exclusive_group(required=True)
    who.add_argument("--student", metavar="ID", help="the student's id, as their submission will be named")
    who.add_argument("--demo", action="store_true", help="the public demo incident (no secret needed)")
    who.add_argument("--practice", metavar="ID", help="a public practice incident (no secret needed)")
    i.add_argument("--secret-file", help="the instructor secret (required with --student)")
    i.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder (or an earlier bundle)")
    i.add_argument("--answer", metavar="DIR", help="also write the reference diagnosis and fixed sheet "
                   "there (never hand it out)")

    z = sub.add_parser("gradescope", help="build a lesson's Gradescope autograder zip (instructors)",
                       epilog="example: grader gradescope lesson1 --secret-file course.secret "
                              "--out lesson1-autograder.zip\n\nThe zip holds the secret and the "
                              "reference solutions: only instructors may have it.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    z.add_argument("lesson", help=LESSON_HELP)
    z.add_argument("--secret-file", required=True, help="the instructor secret (it travels in the zip)")
    z.add_argument("--out", metavar="FILE.zip", help="the zip to write (default: LESSON-autograder.zip)")
    z.add_argument("--student-key", choices=("email", "sid", "id"), default="email",
                   help="lesson 6: the field of Gradescope's submission metadata that names a "
                        "student, as you named them with `grader incident --student` (default: email)")

    r = sub.add_parser("release", help="build the learner edition (instructors)",
                       epilog="examples:\n  grader release --out learner-edition/\n"
                              "  grader release --out free/ --lessons lesson1,lesson2\n"
                              "  grader release --out late/ --publish-solutions lesson1,lesson2",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--out", required=True, metavar="DIR",
                   help="a new or empty folder (or an earlier release, which is replaced)")
    r.add_argument("--lessons", metavar="L,L,...", help="the lessons it holds (default: every lesson)")
    r.add_argument("--publish-solutions", metavar="L,L,...",
                   help="also ship these lessons' reference solutions (their deadlines have passed)")


def _sheet_commands(sub):
    s = sub.add_parser("sheet", help="validate a design sheet, or replay it on the reference worker",
                       epilog="examples:\n  grader sheet validate design_sheet.yaml\n"
                              "  grader sheet run design_sheet.yaml --baseline incident/sheets/R42.yaml "
                              "--plot release.png",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = s.add_subparsers(dest="action", required=True)
    v = actions.add_parser("validate", help="every problem, with its place in the file and what was expected")
    v.add_argument("file", help=SHEET_HELP)
    v.add_argument("--json", action="store_true", help="print the problems as JSON")
    r = actions.add_parser("run", help="replay the sheet and print the release-relevant figures")
    r.add_argument("file", help=SHEET_HELP)
    r.add_argument("--workload", metavar="W", help="a scenario or workload file (default: the sheet's "
                   "release_criteria.workload, else lesson 6's incident scenario)")
    r.add_argument("--seeds", metavar="S,S,...", help="paired seeds (default: the sheet's paired_seeds)")
    r.add_argument("--baseline", metavar="SHEET", help="also replay this sheet on the same seeds and "
                   "decide the release with lesson 5's rule (the baseline's release_criteria.rule)")
    r.add_argument("--own", action="store_true",
                   help="run the sheet's knobs on your own functions (assignments/lessonN/exercise.py) "
                        "instead of the reference's; the learner edition always does")
    r.add_argument("--json", action="store_true", help="print the figures as JSON")
    r.add_argument("--plot", metavar="FILE.png", help="also draw the figures (against the baseline) "
                   "into a PNG file")
    return actions


def _error(e: Exception, as_json: bool = False, **about) -> None:
    """An input error's one line: it may name a learner's file, so it is shown, not obeyed.
    With ``--json`` it is also one JSON object on stdout, ``{"error": ..., "exit_code": 2}``
    and what it is ``about`` (the submission it stopped): a script reading the report gets
    an object it can parse for every failure, not an empty stream."""
    print(terminal([f"grader: {e}"]), file=sys.stderr)
    if as_json:
        print(json.dumps({**about, "error": str(e), "exit_code": 2}, sort_keys=True))


def _emit(report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), sort_keys=True))
    else:
        print(render(report))


def _experiment(args, course) -> int:
    from grader.course import experiments
    from grader.course.experiments.common import plot_path, save_plot
    path = plot_path(args.plot, {"the submission": args.submission}) if args.plot else None
    outcome = experiments.run(args.name, args.settings, course, args.submission, progress=True)
    plot = str(save_plot(outcome.plot, path)) if path and outcome.plot else None
    if args.json:
        print(json.dumps({**outcome.to_dict(), "plot": plot}, sort_keys=True))
    else:
        print(outcome.render())
        if plot:
            print(f"  plot: {plot}")
    return 0


def _one_submission(args) -> None:
    """`grader check lesson3 my.py` means what `--submission my.py` means: a learner reaches for
    the positional form first. Two different paths are refused rather than one quietly chosen."""
    file = getattr(args, "submission_path", None)
    if file is None:
        return
    if args.submission is not None and Path(args.submission) != Path(file):
        raise InputError(file, f"given with --submission {args.submission} as well; give one submission")
    args.submission = file


def _parse(parser: Parser, argv) -> argparse.Namespace:
    """parse_args, and what argparse leaves undone:

    - the experiment's name, the submission's file and grade's files after a flag or `--` too
      (`grader check lesson1 --json my.py`, `grader experiment --json goodput`, `grader grade
      lesson1 a.py --secret-file s b.py`): argparse fills a positional from the words before
      the first flag only, and calls the rest unrecognized;
    - --course before and after the command made one (two different folders are refused);
    - `grader experiment --help` answered for that course, wherever --course was typed;
    - a command's option typed before the command, or mistyped, named with where it goes."""
    words = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(words)
    _one_course(parser, args)
    command = getattr(args, "command_parser", parser)
    if getattr(args, "experiment_help", False):
        _experiment_help(command, args.course)
    cut = extra.index("--") if "--" in extra else len(extra)
    values = [w for w in extra[:cut] if not w.startswith("-")] + extra[cut + 1:]
    extra = [w for w in extra[:cut] if w.startswith("-")]
    for dest in ("name", "submission_path"):
        if getattr(args, dest, "") is None and values:
            setattr(args, dest, command.value_of(dest, values.pop(0)))
    if isinstance(getattr(args, "paths", None), list):        # grade's files, some after a flag
        args.paths += [command.value_of("paths", v) for v in values]
        values = []
    missing = command.needed_missing(args)
    if missing:
        command.error(f"the following arguments are required: {', '.join(missing)}")
    if extra or values:
        parser.error("unrecognized arguments: " + " ".join(extra + values)
                     + _where_it_goes(command, words, extra))
    _no_option_taken_for_a_file(command, words, args)
    return args


def _no_option_taken_for_a_file(command: Parser, words: list[str], args) -> None:
    """`grader check lesson1 -- --json`: the one word after `--` is the submission, and the
    check said only "--json: no such submission file" (`grader check -- --json`: "no such
    lesson"). An option of the command taken for a lesson, an experiment or a file (with no
    file of that name) is said to have come after `--`."""
    if "--" not in words:
        return
    names = [getattr(args, dest, None) for dest in ("lesson", "name")]
    files = [getattr(args, "submission_path", None), *(getattr(args, "paths", None) or ())]
    for word in names + [f for f in files if isinstance(f, str) and not os.path.lexists(f)]:
        if isinstance(word, str) and command.knows(word):
            command.error(f"{word}: {AFTER_DOUBLE_DASH}")


def _one_course(parser: Parser, args) -> None:
    """args.course: the folder --course names, typed before the command, after it, or both
    (the same folder twice is no conflict: `--course .` and its full path)."""
    given = [getattr(args, d) for d in ("course", COURSE_AFTER_COMMAND, COURSE_AFTER_ACTION)
             if getattr(args, d, None) is not None]
    for dest in (COURSE_AFTER_COMMAND, COURSE_AFTER_ACTION):
        if hasattr(args, dest):
            delattr(args, dest)
    other = next((g for g in given if not one_value(given[0], g)), None)
    if other is not None:
        parser.error(f"argument --course: given twice ({given[0]} and {other}): give the course once")
    args.course = given[-1] if given else None


def _where_it_goes(command: Parser, words: list[str], extra: list[str]) -> str:
    """For the first unrecognized option: typed before the command it belongs to (`grader
    --json check`, `grader sheet --json validate`), where it goes; after `--`, that it was
    read as a value; else the option of the command it is closest to, or how to give a
    value that begins with a dash."""
    import difflib
    if not extra:
        return ""
    word = extra[0]
    at = words.index(word) if word in words else len(words)
    names = command.prog.split()            # grader sheet validate
    level, i = 0, 0
    for name in names[1:]:                  # the command's words typed before the option
        if name in words[i:at]:
            i, level = words.index(name, i, at) + 1, level + 1
    if "--" in words[:at]:
        if command.knows(word):             # `forget -- -bob --gradebook g.db`
            return f" ({word} {AFTER_DOUBLE_DASH})"
    elif level < len(names) - 1 and command.knows(word):
        return (f" ({word} is not an option of {' '.join(names[:level + 1])}: it goes after "
                f"{names[-1]}, as in: {command.prog} ... {word})")
    near = difflib.get_close_matches(word.split("=", 1)[0], command.options(), n=1, cutoff=0.8)
    if near:
        return f" (did you mean {near[0]}?)"
    if word.startswith("--"):
        return f" ({command.prog} has no option {word}: {command.prog} --help lists them)"
    return f" ({word} was read as an option; a value that begins with - goes after --, as in: -- {word})"


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        args = _parse(_parser(), argv)          # --help prints: a closed pipe can meet it too
        return _run(args)
    except BrokenPipeError:
        # The reader stopped early (grader check lesson1 | head): nothing is wrong, and the
        # rest of the output has nowhere to go, including what the interpreter flushes at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        kept = ""
        if args is not None and args.command == "grade":
            from grader.instructor.batch import how_to_go_on
            kept = f" A class grade keeps every result it recorded: {how_to_go_on(args.force)}."
        print(f"\ngrader: interrupted.{kept}", file=sys.stderr)
        return 128 + signal.SIGINT


def _run(args) -> int:
    # A check's sandbox child starts first: its start goes by beside the imports, the
    # course and the lesson's cases that the grade reads before its first call.
    with spare() if args.command == "check" else contextlib.nullcontext():
        return _command(args)


def _command(args) -> int:
    from grader.engine.pipeline import checked_by_default, grade_path   # after parsing: --help stays instant
    try:
        _one_submission(args)
        course = find_course(args.course)
        if args.command == "experiment":
            return _experiment(args, course)
        if args.command == "sheet":
            return _sheet(args, course)
        if args.command in INSTRUCTOR_COMMANDS:
            return INSTRUCTOR_COMMANDS[args.command](args, course)
        course.require_lesson(args.lesson)
        if args.command == "check":
            path = (Path(args.submission) if args.submission
                    else course.assignment(args.lesson) / checked_by_default(args.lesson))
            _emit(grade_path(args.lesson, path, course, mode="check"), args.json)
        return 0
    except INPUT_ERRORS as e:
        _error(e, getattr(args, "json", False))
        return 2


def _grade(args, course) -> int:
    from grader.engine.pipeline import folder_files, grade_path
    from grader.engine.submission import is_submission_folder, student_named
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", "give at least 1 worker process")
    course.require_lesson(args.lesson)
    secret = load_secret(args.secret_file)
    for path in args.paths:
        if path.endswith(("/", os.sep)) and not Path(path).exists():
            # Typed as a folder (a shell completes one with its /): a mistyped class folder,
            # not a missing submission file.
            raise InputError(path, "no such class folder")
    files = folder_files(args.lesson)
    folders = [p for p in args.paths if Path(p).is_dir()
               and not (files is not None and is_submission_folder(Path(p), files))]
    if folders:
        if len(args.paths) != 1:
            raise InputError(folders[0], "a class folder must be the only path given")
        return _grade_class(args, course, secret, Path(folders[0]))
    for flag, given, why in CLASS_ONLY:
        if getattr(args, given) not in (None, False):
            # Accepted and ignored, the flag would seem to have done what it says.
            raise InputError(flag, f"applies to a class folder (a folder of submissions); files "
                                   f"named one by one {why}")
    if files is None and not args.unconfined_ok:
        from grader.engine.sandbox.session import require_confinement
        require_confinement()                   # refused before any file is graded
    if args.gradebook:
        _refuse_what_the_gradebook_cannot_keep(args.paths, files is not None)
    book = _gradebook(args, course, create=True) if args.gradebook else None
    try:
        prepared = {}           # the rubric and cases, when the gradebook needed them first
        if book is not None:
            from grader.engine.checks import REGISTRY
            from grader.engine.rubric import load_rubric
            from grader.engine.pipeline import build_cases
            from grader.engine.fingerprint import grading_version
            from grader.instructor.batch import refuse_changed_rubric, refuse_mixed_results
            from grader.instructor.gradebook import cases_digest
            from grader.lessons import lesson_module
            lesson_module(args.lesson)
            prepared = {"rubric": load_rubric(course.rubric_path(args.lesson), REGISTRY),
                        "cases": build_cases(args.lesson, course, secret)}
            refuse_changed_rubric(book, prepared["rubric"])
            # Each file replaces its student's result: on other cases, or by other grading
            # code, than the rest of the class's, the gradebook would mix two gradings.
            refuse_mixed_results(book, args.lesson, cases_digest([c.summary() for c in prepared["cases"]]),
                                 grading_version(), args.secret_file)
        unread = 0
        for path in args.paths:
            try:
                report = grade_path(args.lesson, Path(path), course, mode="grade", secret=secret,
                                    unconfined_ok=args.unconfined_ok, **prepared)
            except InputError as e:
                # One unreadable submission must not stop the others; the exit code still
                # tells a script that one was not graded.
                _error(e, args.json, submission=path)
                unread += 1
                continue
            if book is not None:
                book.record(student_named(Path(path), files is not None), report.to_dict())
            _emit(report, args.json)
    finally:
        if book is not None:
            book.close()
    return 2 if unread else 0


def _refuse_what_the_gradebook_cannot_keep(paths: list[str], folder: bool) -> None:
    """Refused before any grade, as in a class folder: two files of one student
    (`v1/alice.py late/alice.py`), which would each be recorded as their result, the later
    over the earlier, in silence; and a path that is not UTF-8 text (a name from an archive
    made with another encoding), which no gradebook can store."""
    from grader.engine.submission import student_named
    from grader.instructor.batch import NOT_UTF8, as_text
    seen: dict[str, str] = {}
    for path in paths:
        shown = as_text(os.path.abspath(path))
        if shown != os.path.abspath(path):
            raise InputError(as_text(path), NOT_UTF8.format(name=shown))
        student = student_named(Path(path), folder)
        if student in seen and Path(seen[student]).resolve() != Path(path).resolve():
            raise InputError(path, f"is {student}'s, as {seen[student]} is: the gradebook keeps one "
                                   f"result a student; grade the one to keep")
        seen.setdefault(student, path)


# The flags of `grade` that mean something only for a class folder: (flag, its argument,
# what files named one by one do instead).
CLASS_ONLY = (
    ("--scheduler", "scheduler", "are graded in this process, one after another"),
    ("--jobs", "jobs", "are graded in this process, one after another"),
    ("--force", "force", "are always graded, and each replaces its gradebook result"),
    ("--quiet", "quiet", "show no progress bar: each prints its report as it is graded"),
)


def _gradebook(args, course, create: bool = False):
    """The gradebook a command names; only grade may create it, and only grade and
    gradebook forget write it (export, feedback and report open it read-only)."""
    from grader.instructor.gradebook import default_gradebook, open_gradebook
    return open_gradebook(args.gradebook or default_gradebook(course.root), create=create,
                          read_only=args.command in READERS)


READERS = ("export", "feedback", "report")


def _grade_class(args, course, secret: bytes, folder: Path) -> int:
    from grader.instructor.batch import run_batch
    with _gradebook(args, course, create=True) as book:
        summary = run_batch(args.lesson, folder, course, secret, book, jobs=args.jobs,
                            force=args.force, scheduler=args.scheduler, progress=not args.quiet,
                            unconfined_ok=args.unconfined_ok, secret_file=args.secret_file)
    print(json.dumps(summary.to_dict(), sort_keys=True) if args.json else summary.render())
    return 0


def _export(args, course) -> int:
    from grader.instructor.exports import export
    with _gradebook(args, course) as book:
        where = export(book, args.format, lesson=args.only_lesson, out=args.out, progress=True)
    if where != "-":
        print(f"wrote the {args.format} export to {where}", file=sys.stderr)
    return 0


def _feedback(args, course) -> int:
    from grader.instructor.exports.feedback import left_over, write_feedback
    with _gradebook(args, course) as book:
        written = write_feedback(book, args.out, lesson=args.only_lesson, fmt=args.format,
                                 public_only=args.public_only)
    print(f"wrote {plural(len(written), 'feedback file')} to {args.out}", file=sys.stderr)
    older = left_over(args.out, written)
    if older:
        names = first_few([p.name for p in older])
        print(terminal([f"grader: {args.out} also holds {plural(len(older), 'earlier feedback file')} "
                        f"this run did not write ({names}): remove them before sending the folder"]),
              file=sys.stderr)
    return 0


def _gradebook_edit(args, course) -> int:
    with _gradebook(args, course) as book:
        print(book.forget(args.student, args.only_lesson, dry_run=args.dry_run).render())
    return 0


def _gradescope(args, course) -> int:
    from grader.instructor.gradescope.build import build_autograder
    out = Path(args.out or f"{args.lesson}-autograder.zip")
    print(build_autograder(course, args.lesson, args.secret_file, out,
                           student_key=args.student_key).render())
    return 0


def _report(args, course) -> int:
    from grader.instructor.class_report import write_report
    from grader.instructor.class_report.numbers import class_numbers
    with _gradebook(args, course) as book:
        if args.json and args.out is None:
            # The numbers were asked for, not a page written in the working directory.
            print(json.dumps(class_numbers(book, args.lesson).to_dict(), sort_keys=True))
            return 0
        written = write_report(book, args.lesson, Path(args.out or "report"))
    if args.json:
        print(json.dumps(written.numbers.to_dict(), sort_keys=True))
        print(f"wrote {written.page} and {len(written.figures)} figures", file=sys.stderr)
    else:
        print(written.render())
    return 0


def _release(args, course) -> int:
    from grader.instructor.release import build_learner_edition

    def listed(text: str | None) -> tuple[str, ...] | None:
        return None if text is None else tuple(x.strip() for x in text.split(",") if x.strip())
    def say(step: str) -> None:
        print(f"grader release: {step} ...", file=sys.stderr, flush=True)
    print(build_learner_edition(course, Path(args.out), lessons=listed(args.lessons),
                                publish=listed(args.publish_solutions) or (), say=say).render())
    return 0


def _sheet(args, course) -> int:
    from grader.course.sheet import blocking, load_sheet, read_file, unfilled
    path = Path(args.file)
    sheet, problems = load_sheet(path, course)
    if args.action == "validate" or blocking(problems):
        blanks = unfilled(sheet if sheet is not None else read_file(path)[0], problems)
        if args.json:
            print(json.dumps({"file": str(path), "valid": not problems,
                              "problems": [p.to_dict() for p in problems],
                              "unfilled": [p.to_dict() for p in blanks]}))
        else:
            head = f"{path}: valid" if not problems else f"{path}: {plural(len(problems), 'problem')}"
            if blanks:
                head += f"; {plural(len(blanks), 'answer')} not yet filled"
            print(terminal([head] + [f"  {p}" for p in problems + blanks]))     # the sheet's keys
        return 0 if not problems else 2
    from grader.course import core, replay
    from grader.course.plots import plot_path
    plot = plot_path(args.plot, {"the sheet": path, "the baseline": args.baseline,
                                 "the workload": args.workload}) if args.plot else None
    chosen, opened = core.default(course, own=args.own)
    with opened:
        print(replay.run_sheets(sheet, path, course, args.workload, args.seeds, args.baseline, args.json,
                                plot, core=chosen, worked=problems))
    return 0


def _incident(args, course) -> int:
    from grader.course.bundle import write_bundle
    from grader.course.incident import demo_incident, incidents_key, practice_incidents, student_incident
    if args.demo:
        incident = demo_incident(course)
    elif args.practice:
        known = {i.id: i for i in practice_incidents(course)}
        if args.practice not in known:
            raise InputError("--practice", f"no practice incident {args.practice!r} (known: {', '.join(known)})")
        incident = known[args.practice]
    else:
        if not args.secret_file:
            raise InputError("--student", "give --secret-file: a student's incident is drawn from the secret")
        _student_id(args.student)
        incident = student_incident(course, incidents_key(load_secret(args.secret_file)), args.student)
    written = write_bundle(incident, Path(args.out))
    print(f"incident {incident.id}: {len(written)} files in {args.out}")
    if not incident.settled:
        print(f"grader: warning: incident {incident.id} did not settle (a fault may leave too little "
              f"evidence); tell the course maintainers", file=sys.stderr)
    if args.answer:
        from grader.course.bundle import write_answer
        print(f"reference answer in {write_answer(incident, Path(args.answer))}")
    return 0


def _student_id(student: str) -> None:
    """A student's incident is drawn from their id exactly as grading will name them: their
    folder's name. A path (`submitted/alice/`, as a shell completes it) would draw an
    incident no submission is ever graded against (an empty id, an unset variable, is
    refused with every empty value, grader/command_line.py)."""
    if "/" in student or os.sep in student:
        name = Path(student).name or "NAME"
        raise InputError("--student", f"{student!r} is a path; give the student's id, their folder's "
                                      f"name alone (--student {name})")


INSTRUCTOR_COMMANDS = {"grade": _grade, "export": _export, "feedback": _feedback,
                       "release": _release, "incident": _incident, "gradescope": _gradescope,
                       "report": _report, "gradebook": _gradebook_edit}


if __name__ == "__main__":
    sys.exit(main())
