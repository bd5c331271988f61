"""The numbers of a class report, read from the gradebook through its API.

For one lesson: the scores of every graded student and their histogram; per criterion its
pass rate, mean score and the cases most students failed, each with how many students hit
it and the feedback line it produced; the students the grader could not grade, or whose
code did not load, ran out of time or crashed; the hidden cases most students failed.

A case a student failed is one their report's criterion cites as evidence (public cases by
name, hidden ones by digest): each report keeps the first 20 a criterion found, so counts
are of students whose first 20 failures include the case.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass

from grader.instructor.batch import distribution

TOP_CASES = 5            # failing cases shown per criterion
TOP_HIDDEN = 10
# How the grader's feedback says what happened to a submission's code (the grading
# pipeline's and grader.engine.checks.call_failure's words), checked in this order.
PROBLEMS = (("did not load", "your file did not load"),
            ("timed out", "did not return in time"),
            ("timed out", "used up its time budget"),
            ("crashed", "ended the process"))


@dataclass(frozen=True)
class CaseHit:
    case: str                 # as evidence cites it: a public case's name, hidden:<digest>
    visibility: str           # public | hidden
    family: str
    students: int             # graded students who failed it
    share: float              # ... of the graded students
    feedback: str             # the line it produced (the commonest among those it came first for)
    more: int = 0             # other cases failed by exactly the same students
    criteria: tuple[str, ...] = ()


@dataclass(frozen=True)
class CriterionStats:
    id: str
    title: str
    max_score: float
    visibility: str
    graded: int
    passed: int
    pass_rate: float          # passed / graded
    mean_score: float
    failing_cases: tuple[CaseHit, ...]
    failed_uncited: int       # did not pass with no case cited (did not load, judged on whole runs)


@dataclass(frozen=True)
class StudentProblem:
    student: str
    kind: str                 # not graded | did not load | timed out | crashed
    detail: str


@dataclass(frozen=True)
class ClassNumbers:
    lesson: str
    title: str
    max_score: float
    students: int             # with a result in the gradebook
    graded: int
    scores: tuple[float, ...]           # of the graded students, sorted
    distribution: dict
    full_marks: int
    criteria: tuple[CriterionStats, ...]
    problems: tuple[StudentProblem, ...]
    hardest_hidden: tuple[CaseHit, ...]
    rubric_versions: tuple[int, ...]
    graded_between: tuple[str, str] | None
    # (cases digest, graded results) of each set of cases the results were graded on: more
    # than one means two secrets, or a regrade not finished, and scores not comparable.
    case_sets: tuple[tuple[str, int], ...] = ()

    def mixed(self) -> str:
        """What makes the class's results not one grading ("" when nothing does)."""
        out = []
        if len(self.case_sets) > 1:
            sets = ", ".join(f"{n} on cases {d[:12]}" for d, n in self.case_sets)
            out.append(f"graded on {len(self.case_sets)} sets of cases ({sets}): two secrets, or a "
                       "regrade not finished; grade the class again with one secret")
        if len(self.rubric_versions) > 1:
            out.append(f"graded under rubric versions {', '.join(map(str, self.rubric_versions))}: "
                       "a regrade not finished")
        return "; ".join(out)

    def to_dict(self) -> dict:
        return asdict(self)


def _problem(feedback: list[str]) -> tuple[str, str] | None:
    for kind, sign in PROBLEMS:
        for line in feedback:
            if sign in line:
                return kind, line
    return None


def _families(report: dict) -> dict[str, tuple[str, str]]:
    """cite -> (visibility, family) of every case a report lists."""
    out = {}
    for c in report.get("cases", ()):
        cite = c["name"] if c["visibility"] == "public" else f"hidden:{c['digest']}"
        out[cite] = (c["visibility"], c["family"])
    return out


def _hits(failures: dict[str, list[tuple[str, str, bool]]], cases: dict, graded: int,
          top: int) -> tuple[CaseHit, ...]:
    """``failures``: cite -> [(student, feedback, cited first)] -> the ``top`` cases most
    students failed. Cases failed by exactly the same students are one row (``more``): the
    one their feedback named first most often stands for them, a public one before a hidden
    one (a learner can run it)."""
    groups: dict[frozenset, list[str]] = {}
    for cite, hits in failures.items():
        groups.setdefault(frozenset(s for s, _, _ in hits), []).append(cite)

    def named_first(cite: str) -> int:
        return sum(1 for _, _, first in failures[cite] if first)
    out = []
    for students, cites in groups.items():
        cites.sort(key=lambda c: (-named_first(c), cases[c][0] != "public", c))
        cite = cites[0]
        hits = failures[cite]
        first = [f for _, f, is_first in hits if is_first] or [f for _, f, _ in hits]
        visibility, family = cases[cite]
        out.append(CaseHit(cite, visibility, family, len(students),
                           round(len(students) / graded, 4) if graded else 0.0,
                           Counter(first).most_common(1)[0][0], more=len(cites) - 1))
    out.sort(key=lambda h: (-h.students, -h.more, h.case))
    return tuple(out[:top])


def class_numbers(book, lesson: str) -> ClassNumbers:
    info = book.lesson(lesson)            # an unknown lesson: one line naming the lessons there are
    results = book.results(lesson)
    graded = [r for r in results if r.status == "graded"]
    problems = [StudentProblem(r.student, "not graded", r.error) for r in results if r.status != "graded"]

    cases: dict[str, tuple[str, str]] = {}
    per_criterion: dict[str, dict[str, list]] = {c.id: {} for c in info.criteria}
    hidden: dict[str, list] = {}
    hidden_criteria: dict[str, set[str]] = {}
    for r in graded:
        report = r.report
        cases.update(_families(report))
        found = _problem([s.feedback for s in r.scores])
        if found:
            problems.append(StudentProblem(r.student, *found))
        for c in report.get("criteria", ()):
            cited = [e for e in c.get("evidence", ()) if e in cases]
            for n, cite in enumerate(dict.fromkeys(cited)):
                hit = (r.student, c["feedback"], n == 0)
                per_criterion.setdefault(c["id"], {}).setdefault(cite, []).append(hit)
                if cite.startswith("hidden:"):
                    hidden.setdefault(cite, []).append(hit)
                    hidden_criteria.setdefault(cite, set()).add(c["id"])

    stats = []
    for c in info.criteria:
        mine = [s for r in graded for s in r.scores if s.criterion == c.id]
        passed = sum(1 for s in mine if s.passed)
        cited = {s for hits in per_criterion.get(c.id, {}).values() for s, _, _ in hits}
        failed = {r.student for r in graded for s in r.scores if s.criterion == c.id and not s.passed}
        stats.append(CriterionStats(
            c.id, c.title, c.max_score, c.visibility, len(mine), passed,
            round(passed / len(mine), 4) if mine else 0.0,
            round(statistics.fmean(s.score for s in mine), 4) if mine else 0.0,
            _hits(per_criterion.get(c.id, {}), cases, len(graded), TOP_CASES),
            len(failed - cited)))
    hardest = tuple(CaseHit(**{**asdict(h), "criteria": tuple(sorted(hidden_criteria[h.case]))})
                    for h in _hits(hidden, cases, len(graded), TOP_HIDDEN))

    scores = tuple(sorted(r.score for r in graded))
    when = sorted(r.graded_at for r in graded)
    return ClassNumbers(
        lesson=lesson, title=info.title, max_score=info.max_score, students=len(results),
        graded=len(graded), scores=scores, distribution=distribution(scores, info.max_score),
        full_marks=sum(1 for s in scores if s >= info.max_score), criteria=tuple(stats),
        problems=tuple(sorted(problems, key=lambda p: (p.kind, p.student))),
        hardest_hidden=hardest, rubric_versions=tuple(sorted({r.rubric_version for r in results})),
        case_sets=tuple(sorted(Counter(r.cases_digest for r in graded).items(), key=lambda kv: (-kv[1], kv[0]))),
        graded_between=(f"{when[0]:%Y-%m-%d %H:%M} UTC", f"{when[-1]:%Y-%m-%d %H:%M} UTC") if when else None)
