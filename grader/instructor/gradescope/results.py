"""A grading report as Gradescope's results.json.

One test per criterion: its points, ``passed``/``failed``, a feedback line as the test's
output. Criteria graded on public cases (``public`` and ``both``) are ``visible`` at once,
with their public feedback: measured on the public cases alone, by a sandbox child that
never received a hidden input, so nothing shown before grades are published can hold one.
Criteria graded on hidden cases only are ``after_published``, with their full feedback, so
a student sees them when the instructor publishes grades; so is a criterion that has no
public feedback to give (lesson 6's, judged on the student's own incident), since on
Gradescope a visible test's output never changes. The top-level output says what was graded and how: the
file, its digest, the cases and their digest, the rubric version, the isolation in force
and the autograder build; ``extra_data`` keeps the same in full for the instructor.

A submission that could not be graded (no file, an unreadable one) still gets one test per
criterion, each at zero with the reason, so the student sees what was expected.

Every output is pinned as text (``TEXT``): left to itself, Gradescope renders the top-level
output as HTML with line breaks ("simple_format"), and that output names the uploaded
files, which the student named. What is shown is made of lines (``terminal``), each
test's output of one (``printable``): the uploaded files' names and the feedback are the
student's text, and none of it may be rendered as markup, start a line or act on how
the rest reads.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema

from grader.engine.pipeline import HIDDEN_LATER
from grader.engine.report import COST_MODEL_NOTE, Report
from grader.engine.rubric import Rubric
from grader.engine.text import printable, terminal
from grader.instructor.gradebook import cases_digest

SCHEMA = Path(__file__).with_name("results.schema.json")
VISIBILITY = {"public": "visible", "both": "visible", "hidden": "after_published"}
# Shown as written, never rendered: the top-level output, and every test's output and name.
TEXT = {"output_format": "text", "test_output_format": "text", "test_name_format": "text"}


def _g(x: float) -> str:
    return f"{round(x, 4):g}"


def _test(n: int, cid: str, title: str, score: float, max_score: float, passed: bool,
          output: str, visibility: str) -> dict:
    return {"number": str(n), "name": f"{cid}: {title}", "score": score, "max_score": max_score,
            "status": "passed" if passed else "failed", "output": printable(output),
            "visibility": VISIBILITY[visibility]}


def from_report(report: Report, *, graded: str, build: dict, notes: tuple[str, ...] = ()) -> dict:
    """results.json of a graded submission. ``graded``: the uploaded file(s) graded, as the
    student named them; ``notes``: how they were picked; ``build``: the autograder's
    autograder.json."""
    notes = tuple(notes) + tuple(report.notes)
    tests = []
    for n, c in enumerate(report.criteria, 1):
        # Only the public feedback is shown at once: a criterion without one (a report
        # made before it existed, or nothing measured on public cases) waits for publishing.
        early = c.public_feedback
        if c.visibility == "hidden" or early == HIDDEN_LATER or (not early and c.feedback):
            tests.append(_test(n, c.id, c.title, c.score, c.max_score, c.passed, c.feedback, "hidden"))
        else:
            tests.append(_test(n, c.id, c.title, c.score, c.max_score, c.passed, early, c.visibility))
    public = sum(1 for c in report.cases if c["visibility"] == "public")
    digest = cases_digest(list(report.cases))
    lines = [f"{report.lesson}: {report.title}: {_g(report.score)} / {_g(report.max_score)}", "",
             f"Graded: {graded} (sha256 {report.submission_digest[:16]})",
             f"Cases: {public} public, {len(report.cases) - public} hidden (cases digest "
             f"{digest[:16]}); rubric version {report.rubric_version}",
             f"Isolation: {report.isolation}",
             f"Autograder: serving-grader {report.grader_version}, course digest "
             f"{build['course_digest'][:16]}"]
    lines += [f"Note: {n}" for n in notes]
    lines += ["", COST_MODEL_NOTE]
    return {
        "score": report.score,
        "execution_time": round(report.duration_s, 3),
        "output": terminal(lines),
        **TEXT,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"lesson": report.lesson, "graded": graded,
                       "submission_digest": report.submission_digest,
                       "rubric_version": report.rubric_version, "cases_digest": digest,
                       "cases": len(report.cases), "isolation": report.isolation,
                       "grader_version": report.grader_version,
                       "course_digest": build["course_digest"],
                       # As shown: a note can quote the student's text (a YAML key), and a
                       # lone surrogate in it is an escape results.json's readers refuse.
                       "notes": [printable(n) for n in notes]},
    }


def not_graded(rubric: Rubric, why: str, *, build: dict) -> dict:
    """results.json of a submission the grader could not grade (the student's to fix):
    zero on every criterion, each saying why."""
    tests = [_test(n, c.id, c.title, 0.0, c.points, False, f"not graded: {why}", c.visibility)
             for n, c in enumerate(rubric.criteria, 1)]
    total = sum(c.points for c in rubric.criteria)
    return {"score": 0.0, "output": terminal([f"{rubric.lesson}: {rubric.title}: 0 / {_g(total)}", "",
                                              f"Not graded: {why}"]), **TEXT,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"lesson": rubric.lesson, "not_graded": printable(why),
                           "course_digest": build.get("course_digest", "")}}


def failed(why: str) -> dict:
    """results.json when the autograder itself failed: no score is a grade, and the
    student is told so (the details are in the log only instructors see)."""
    return {"score": 0.0, "visibility": "visible", "stdout_visibility": "hidden", **TEXT,
            "output": terminal([f"The autograder could not grade this submission: {why}",
                                "This is not a grade: your instructor can see what went wrong."]),
            "extra_data": {"autograder_failed": why}}


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def problems(results: dict) -> list[str]:
    """Where ``results`` departs from Gradescope's documented format (empty: it does not),
    or from JSON itself: a string that is not Unicode (a lone surrogate, which json.dumps
    writes as an escape a strict reader refuses)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}"
            for e in _validator().iter_errors(results)] + list(_not_unicode(results, ""))


def _not_unicode(value, where: str):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _not_unicode(key, where or "(top level)")
            yield from _not_unicode(item, f"{where}/{key}" if where else str(key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _not_unicode(item, f"{where}/{n}")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            yield f"{where}: not Unicode text (a lone surrogate at character {e.start})"
