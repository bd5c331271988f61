"""Gradescope: a results.json per submission in the autograder's format.

One test per criterion (score, max_score, name, output = the feedback line, visibility).
Criteria graded on hidden cases only are ``after_published``: the learner sees them when
the instructor publishes grades. Files go to OUT/<lesson>/<student>/results.json.
"""
from __future__ import annotations

import json
from pathlib import Path

from grader.engine.errors import InputError
from grader.instructor.exports import safe_name


def results_json(result, info) -> dict:
    """One stored result as Gradescope's results.json object."""
    titles = {c.id: c for c in info.criteria}
    if result.status != "graded":
        return {"score": 0.0, "output": f"Not graded: {result.error}", "visibility": "visible",
                "stdout_visibility": "hidden", "tests": []}
    tests = []
    for n, s in enumerate(result.scores, 1):
        c = titles.get(s.criterion)
        hidden = c is not None and c.visibility == "hidden"
        tests.append({
            "name": f"{s.criterion}: {c.title}" if c else s.criterion,
            "number": str(n),
            "score": s.score,
            "max_score": s.max_score,
            "status": "passed" if s.passed else "failed",
            "output": s.feedback,
            "visibility": "after_published" if hidden else "visible",
        })
    return {
        "score": result.score,
        "execution_time": result.duration_s,
        "output": (f"{info.id}: {info.title}: {result.score:g} / {result.max_score:g} "
                   f"(submission sha256 {result.submission_digest[:16]}, rubric version "
                   f"{result.rubric_version})"),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"student": result.student, "lesson": result.lesson,
                       "submission_digest": result.submission_digest,
                       "rubric_version": result.rubric_version,
                       "graded_at": result.graded_at.isoformat()},
    }


def export_gradescope(book, out: str, *, lesson: str | None = None) -> str:
    infos = {i.id: i for i in book.lessons()}
    if lesson is not None:
        book.lesson(lesson)
    root = Path(out)
    try:
        for r in book.results(lesson):
            folder = root / safe_name(r.lesson) / safe_name(r.student)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "results.json").write_text(
                json.dumps(results_json(r, infos[r.lesson]), indent=2, sort_keys=True) + "\n",
                encoding="utf-8")
    except OSError as e:
        raise InputError(out, f"cannot write the Gradescope results: {e.strerror}") from None
    return str(root)
