"""Grading one submission for one lesson, as a pipeline of small steps.

rubric -> submission -> cases -> sandbox -> criteria -> report. Each step is a function;
a lesson whose submission is a folder of data (lesson 6) skips the sandbox;
a failure of the learner's code costs points inside its criterion, a failure of the
instructor's input (rubric, cases, secret) is an InputError before anything is scored.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path

from grader import __version__
from grader.engine.cases import Case
from grader.engine.checks import REGISTRY, CheckContext, Measure
from grader.engine.layout import FAMILIES, Course
from grader.engine.errors import InputError
from grader.engine.fingerprint import grading_version
from grader.lessons import lesson_module
from grader.engine.memo import files_digest, remember
from grader.engine.oracle import has_solution, recorded
from grader.engine.report import CriterionResult, Report
from grader.engine.rubric import Criterion, Rubric, load_rubric
from grader.engine.sandbox.session import UNCONFINED_FLAG, Sandbox
from grader.engine.submission import Submission, load_submission
from grader.engine.text import one_line


def build_cases(lesson: str, course: Course, secret: bytes | None) -> list[Case]:
    module = lesson_module(lesson)
    # The public cases follow from the course's files, so they are built once and read
    # back after. A lesson whose public cases are made of the reference's runs (lessons 5
    # and 6: PUBLIC_CASES_NEED names the solutions) has them recorded in the learner edition.
    public = files_digest(course.root / "assignments", course.root / "rubrics")
    needs = getattr(module, "PUBLIC_CASES_NEED", ())
    cases = list(recorded(f"cases-{lesson}", lesson,
                          lambda: remember("public-cases", f"{lesson}|{public}",
                                           lambda: _course_files(course.assignment(lesson),
                                                                 module.public_cases, course)),
                          available=all(has_solution(n) for n in needs)))
    if secret is not None:
        cases += _course_files(FAMILIES, module.hidden_cases, secret, course)
    return cases


def _course_files(where, build, *args) -> list[Case]:
    """build(*args), where a course file of the wrong shape (a number where a list belongs,
    a list where a mapping does) is one line naming the folder, never a traceback. The
    lessons name the file and field where they check; this catches what they do not."""
    try:
        return list(build(*args))
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:
        text = " ".join(f"{type(e).__name__}: {e}".split())[:160]
        raise InputError(str(where), f"a probe, scenario or family file holds a value of the "
                                     f"wrong shape ({text})") from None


HIDDEN_LATER = "(feedback on hidden cases is published later)"


def score(criterion: Criterion, measure: Measure, public_feedback: str) -> CriterionResult:
    # Feedback quotes what the learner returned, raised or wrote (a verdict's reason, a
    # design sheet's key): it enters the report here as one printable line, so neither the
    # gradebook nor any output made from it holds an escape, a line break or an override.
    share = criterion.credit.share(measure.value) if measure.checked else 0.0
    return CriterionResult(id=criterion.id, title=criterion.title,
                           score=round(criterion.points * share, 4), max_score=criterion.points,
                           passed=measure.checked and share >= 1.0, feedback=one_line(measure.feedback),
                           visibility=criterion.visibility, evidence=measure.evidence,
                           checked=measure.checked, public_feedback=one_line(public_feedback))


def run_criteria(rubric: Rubric, cases: list[Case], course: Course, mode: str, public_box,
                 hidden_box, submission=None):
    """Each criterion's result. Hidden inputs stay hidden from what is handed back: a
    criterion's public feedback is measured on its public cases alone, with public_box, a
    child that never receives a hidden input, so nothing it returns (an echoed argument,
    an exception message, anything it kept from an earlier call) can hold one, and before
    hidden_box receives any, so nothing it times can either. The score
    is measured on every case the criterion sees, with hidden_box. Both share one memo:
    the worker's runs are made once per case, and a measure asks the public child for its
    public cases (checks.ask)."""
    memo: dict = {}

    def measure(box, subset, criterion, answered=None) -> Measure:
        if box is not None and box.load_error:
            return Measure(0.0, f"your file did not load: {box.load_error}")
        return REGISTRY[criterion.check](CheckContext(box, subset, course, memo, submission,
                                                      public_sandbox=public_box, answered=answered),
                                         criterion.params)

    # Two passes: every criterion's public feedback first, then the hidden measures. The
    # hidden child's timing is seen by the public one (a pause by a hidden input's value,
    # read as the gap between two of the public child's calls, was quoted in the next
    # criterion's public feedback), so no public feedback is measured after the hidden
    # child has been sent anything.
    early = []
    for criterion in rubric.criteria:
        if not criterion.runs_in(mode):
            continue
        visible = [c for c in cases if criterion.visibility == "both"
                   or c.visibility == criterion.visibility]
        public = [c for c in visible if c.visibility == "public"]
        if len(public) == len(visible):
            full = measure(public_box, visible, criterion)
            early.append((criterion, full.feedback, full, visible, None))
        elif public and submission is None:
            answered: dict = {}          # the first measure's public answers, for the second
            told = f"{measure(public_box, public, criterion, answered).feedback} " \
                   f"(public cases; the hidden cases' feedback is published later)"
            early.append((criterion, told, None, visible, answered))
        else:
            # Hidden cases only, or a folder of data measured against the student's own
            # hidden incident: nothing of it goes back early.
            early.append((criterion, HIDDEN_LATER, None, visible, None))
    for criterion, public_feedback, full, visible, answered in early:
        if full is None:
            full = measure(hidden_box, visible, criterion, answered)
        yield score(criterion, full, public_feedback)


PRINTED = ("your file printed while it was checked: what a submission prints is never shown "
           "(to watch a case, call your function on it yourself)")


def grade_submission(lesson: str, submission: Submission, course: Course, *, mode: str,
                     secret: bytes | None = None, rubric: Rubric | None = None,
                     cases: list[Case] | None = None, unconfined_ok: bool = False,
                     sandbox=None) -> Report:
    """``unconfined_ok``: a grade may run where the sandbox cannot confine the submission
    (the instructor passed UNCONFINED_FLAG); otherwise it refuses (Unconfined). ``sandbox``
    makes the stand-in a submission is called through instead (the learner edition's
    self-proof grades the course's own code in process)."""
    started = time.perf_counter()
    notes = submission.notes

    def prepare():
        module = lesson_module(lesson)          # registers the lesson's checks
        return (module, rubric or load_rubric(course.rubric_path(lesson), REGISTRY),
                cases if cases is not None else build_cases(lesson, course,
                                                            secret if mode == "grade" else None))

    if folder_files(lesson) is not None:
        # Data, not code: nothing of the learner's runs, so there is no sandbox; the lesson
        # parses the folder (every problem becomes feedback) and its checks read the result.
        module, rubric, cases = prepare()
        results = tuple(run_criteria(rubric, cases, course, mode, None, None,
                                     module.parse_submission(submission, course)))
        isolation = "none needed: the submission is data, and no learner code runs"
    else:
        # The sandboxes first: their children load the submission while the cases are
        # prepared. A grade holds hidden cases and goes to the gradebook: it never runs
        # unconfined unless the instructor said so; a check is the learner's own code, and
        # says. A grade's hidden cases go to a child of their own (see run_criteria).
        required = mode == "grade" and not unconfined_ok
        name = Path(submission.path).name
        def opened():
            return sandbox() if sandbox else Sandbox(submission.source, name, require_confinement=required,
                                                     cells=submission.cells)
        with contextlib.ExitStack() as stack:
            public_box = stack.enter_context(opened())
            # Each child has the submission's full budget: the hidden child hears only the
            # hidden cases, the public one the public cases (a measure may ask them twice).
            hidden_box = public_box if mode != "grade" else stack.enter_context(opened())
            module, rubric, cases = prepare()
            results = tuple(run_criteria(rubric, cases, course, mode, public_box, hidden_box))
            isolation = public_box.isolation
            if getattr(public_box, "printed", False):
                # A learner debugging with print() otherwise sees nothing and no reason why.
                # The public child's alone: whether the hidden child printed would tell the
                # report a bit of what the hidden cases hold.
                notes += (PRINTED,)
            if not (public_box.confined and hidden_box.confined):
                notes += (f"not confined: the submission could read the course's files and write "
                          f"the grader's (the sandbox here lacks {public_box.lacks or hidden_box.lacks})"
                          + (f"; graded anyway ({UNCONFINED_FLAG})" if mode == "grade" else ""),)
    unchecked = [r.id for r in results if not r.checked]
    if mode == "grade" and unchecked:
        # A grade stands on every criterion; only the learner edition's check may skip one.
        raise InputError(f"rubrics/{lesson}.yaml", f"criteria {', '.join(unchecked)} could not "
                         f"be checked here (is this the learner edition?)")
    return Report(lesson=lesson, title=rubric.title, mode=mode, submission=submission.path,
                  submission_digest=submission.digest, rubric_version=rubric.version,
                  criteria=results, cases=tuple(c.summary() for c in cases),
                  isolation=isolation,
                  # A grade names the code that made it (a gradebook keeps a class to one).
                  grader_version=grading_version() if mode == "grade" else __version__,
                  duration_s=round(time.perf_counter() - started, 3),
                  notes=tuple(one_line(n) for n in notes))     # they name the learner's files


def checked_by_default(lesson: str) -> str:
    """What `grader check LESSON` grades with no file named, in the lesson's assignments/
    folder: its exercise file, or (a folder lesson) the folder of the learner's files."""
    return "exercise.py" if folder_files(lesson) is None else "submission"


def folder_files(lesson: str) -> tuple[str, ...] | None:
    """The files of a lesson whose submission is a folder (``SUBMISSION = "folder"`` in its
    module), or None for a lesson graded on a code file."""
    module = lesson_module(lesson)
    return tuple(module.FILES) if getattr(module, "SUBMISSION", "file") == "folder" else None


def grade_path(lesson: str, path: Path, course: Course, *, student: str = "", **kw) -> Report:
    return grade_submission(lesson, load_submission(path, folder_files(lesson), student), course, **kw)
