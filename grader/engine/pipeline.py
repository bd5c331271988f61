"""Grading one submission for one lesson, as a pipeline of small steps.

rubric -> submission -> cases -> sandbox -> criteria -> report. Each step is a function;
a lesson whose submission is a folder of data (lesson 6) skips the sandbox;
a failure of the learner's code costs points inside its criterion, a failure of the
instructor's input (rubric, cases, secret) is an InputError before anything is scored.
"""
from __future__ import annotations

import time
from pathlib import Path

from grader import __version__
from grader.engine.cases import Case
from grader.engine.checks import REGISTRY, CheckContext, Measure
from grader.engine.layout import FAMILIES, Course
from grader.engine.errors import InputError
from grader.lessons import lesson_module
from grader.engine.memo import files_digest, remember
from grader.engine.oracle import reference_policies
from grader.engine.report import CriterionResult, Report
from grader.engine.rubric import Criterion, Rubric, load_rubric
from grader.engine.sandbox.session import UNCONFINED_FLAG, Sandbox
from grader.engine.submission import Submission, load_submission


def build_cases(lesson: str, course: Course, secret: bytes | None) -> list[Case]:
    module = lesson_module(lesson)
    # The public cases follow from the course's files (and from the edition: the learner
    # edition has no worker-run cases), so they are built once and read back after.
    public = files_digest(course.root / "assignments", course.root / "rubrics")
    cases = list(remember("public-cases", f"{lesson}|{public}|{reference_policies()}",
                          lambda: _course_files(course.assignment(lesson), module.public_cases, course)))
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


def score(criterion: Criterion, measure: Measure) -> CriterionResult:
    share = criterion.credit.share(measure.value) if measure.checked else 0.0
    return CriterionResult(id=criterion.id, title=criterion.title,
                           score=round(criterion.points * share, 4), max_score=criterion.points,
                           passed=measure.checked and share >= 1.0, feedback=measure.feedback,
                           visibility=criterion.visibility, evidence=measure.evidence,
                           checked=measure.checked)


def run_criteria(rubric: Rubric, ctx: CheckContext, mode: str, load_error: str | None):
    for criterion in rubric.criteria:
        if not criterion.runs_in(mode):
            continue
        visible = [c for c in ctx.cases if criterion.visibility == "both"
                   or c.visibility == criterion.visibility]
        if load_error:
            measure = Measure(0.0, f"your file did not load: {load_error}")
        else:
            sub = CheckContext(ctx.sandbox, visible, ctx.course, ctx.memo, ctx.submission)
            measure = REGISTRY[criterion.check](sub, criterion.params)
        yield score(criterion, measure)


def grade_submission(lesson: str, submission: Submission, course: Course, *, mode: str,
                     secret: bytes | None = None, rubric: Rubric | None = None,
                     cases: list[Case] | None = None, unconfined_ok: bool = False) -> Report:
    """``unconfined_ok``: a grade may run where the sandbox cannot confine the submission
    (the instructor passed UNCONFINED_FLAG); otherwise it refuses (Unconfined)."""
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
        ctx = CheckContext(None, cases, course, submission=module.parse_submission(submission, course))
        results = tuple(run_criteria(rubric, ctx, mode, None))
        isolation = "none needed: the submission is data, and no learner code runs"
    else:
        # The sandbox first: its child loads the submission while the cases are prepared.
        # A grade holds hidden cases and goes to the gradebook: it never runs unconfined
        # unless the instructor said so; a check is the learner's own code, and says.
        with Sandbox(submission.source, Path(submission.path).name,
                     require_confinement=mode == "grade" and not unconfined_ok) as sandbox:
            module, rubric, cases = prepare()
            ctx = CheckContext(sandbox, cases, course)
            results = tuple(run_criteria(rubric, ctx, mode, sandbox.load_error))
            isolation = sandbox.isolation
            if not sandbox.confined:
                notes += (f"not confined: the submission could read the course's files and write "
                          f"the grader's (the sandbox here lacks {sandbox.lacks})"
                          + (f"; graded anyway ({UNCONFINED_FLAG})" if mode == "grade" else ""),)
    unchecked = [r.id for r in results if not r.checked]
    if mode == "grade" and unchecked:
        # A grade stands on every criterion; only the learner edition's check may skip one.
        raise InputError(f"rubrics/{lesson}.yaml", f"criteria {', '.join(unchecked)} could not "
                         f"be checked here (is this the learner edition?)")
    return Report(lesson=lesson, title=rubric.title, mode=mode, submission=submission.path,
                  submission_digest=submission.digest, rubric_version=rubric.version,
                  criteria=results, cases=tuple(c.summary() for c in cases),
                  isolation=isolation, grader_version=__version__,
                  duration_s=round(time.perf_counter() - started, 3), notes=notes)


def folder_files(lesson: str) -> tuple[str, ...] | None:
    """The files of a lesson whose submission is a folder (``SUBMISSION = "folder"`` in its
    module), or None for a lesson graded on a code file."""
    module = lesson_module(lesson)
    return tuple(module.FILES) if getattr(module, "SUBMISSION", "file") == "folder" else None


def grade_path(lesson: str, path: Path, course: Course, *, student: str = "", **kw) -> Report:
    return grade_submission(lesson, load_submission(path, folder_files(lesson), student), course, **kw)
