"""Lesson 5's goodput criterion: good requests per second of a window, against the oracle.

goodput is built on qualify, so a goodput that calls a wrong qualify would lose twice for
one mistake: an answer that matches the learner's own qualify counts as right here, and
the qualify criteria charge that mistake once. Only a goodput that shows it reads those
verdicts gets that: one that matches them on a set they split (some records good, some
not). Where they judge a set all alike, a goodput that ignores them (0.0, or every record)
matches them too: a qualify that never said good once paid a goodput of 0.0 in full.

A qualify that raises on a record (an IndexError on a record with no tokens) makes a goodput
built on it raise on every set holding that record: that goodput raised the very exception its
qualify raised, and once it shows that it reads the verdicts it is not charged for it (before,
a qualify that failed on zero-token records lost goodput's point as well as its own).
"""
from __future__ import annotations

import math

from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext, Measure, ask, ask_once, check, constant_answer, grade_answers
from grader.engine.oracle import reference_oracle

oracle = reference_oracle("lesson5")     # recorded for the public cases in the learner edition

REL_TOL = 1e-9
_AS_ITS_QUALIFY = object()   # a goodput that raised what its own qualify raised on the set


def _raised(problem: str) -> str:
    """What a call raised, with where ("IndexError: ... (exercise.py line 12)"), or ""."""
    return problem.split(" raised ", 1)[1] if " raised " in problem else ""


def _own_goodput(ctx: CheckContext, cases: list[Case]) -> tuple[dict[str, tuple[int, int]], dict[str, set[str]]]:
    """Each record set's (good, records) as the learner's own qualify counts them, and what
    it raised on the sets where it raised. A goodput that calls a wrong qualify is consistent:
    that mistake is charged to the qualify criteria. A qualify that gives every record one
    verdict is no qualify: nothing is consistent with it."""
    # Each record is asked with its set's visibility: a hidden set's records are hidden inputs.
    probes = [Case("own", f"{c.name}/{i}", c.visibility, (r, c.inputs[1]))
              for c in cases for i, r in enumerate(c.inputs[0])]
    verdicts = ask_once(ctx, "own-qualify", "qualify", probes, lambda c: c.inputs, str)
    if constant_answer(verdicts, "qualify"):
        return {}, {}
    own, raised = {}, {}
    for c in cases:
        mine = [a for a in verdicts if a.case.name.rsplit("/", 1)[0] == c.name]
        if all(not a.problem for a in mine):
            own[c.name] = (sum(1 for a in mine if a.value == "good"), len(mine))
        elif any(_raised(a.problem) for a in mine):
            raised[c.name] = {_raised(a.problem) for a in mine} - {""}
    return own, raised


def _reads_verdicts(answers: list[Answer], own: dict[str, tuple[int, int]]) -> bool:
    """Whether the goodput matches its own qualify on a set that qualify splits (some records
    good, some not). Where it judges a set all alike, a goodput that ignores the verdicts
    (0.0, or every record) matches them as well as one that counts them."""
    for a in answers:
        good, n = own.get(a.case.name, (0, 0))
        if not a.problem and 0 < good < n and _close(a.value, good / a.case.inputs[2]):
            return True
    return False


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


@check("lesson5.goodput")
def goodput(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("goodput")
    answers = ask(ctx, "goodput", cases, lambda c: c.inputs, float)
    off = any(_raised(a.problem) if a.problem else not _close(a.value, oracle.goodput(*a.case.inputs))
              for a in answers)
    own, raised = _own_goodput(ctx, cases) if off else ({}, {})
    credit = _reads_verdicts(answers, own)
    if credit:
        # Raised what its qualify raised on this set: charged to the qualify criteria.
        answers = [Answer(a.case, value=_AS_ITS_QUALIFY) if _raised(a.problem) in raised.get(a.case.name, ()) else a
                   for a in answers]

    def judge(case: Case, got: float) -> str:
        if got is _AS_ITS_QUALIFY:
            return ""
        records, slo, window = case.inputs
        want = oracle.goodput(records, slo, window)
        mine = own[case.name][0] / window if case.name in own else None
        if _close(got, want) or (credit and mine is not None and _close(got, mine)):
            return ""
        said = f"returned {got:.6g} req/s, expected {want:.6g} ({round(want * window)} good requests / {window:g} s)"
        if mine is None:
            return said
        good, n = own[case.name]
        if not _close(got, mine):
            return f"{said}; your qualify counts {good} good, which would give {mine:.6g}"
        return (f"{said}; your qualify calls {'none' if good == 0 else 'all'} of this set's {n} records good, "
                f"so a goodput that ignores the verdicts would match it too, and on no set your qualify "
                f"splits does your goodput match its count")
    return grade_answers(answers, judge, "record sets")
