"""Lesson 5's goodput criterion: good requests per second of a window, against the oracle.

goodput is built on qualify, so a goodput that calls a wrong qualify would lose twice for
one mistake: an answer that matches the learner's own qualify counts as right here, and
the qualify criteria charge that mistake once.
"""
from __future__ import annotations

import math

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask, ask_once, check, grade_answers
from grader.engine.oracle import reference_oracle

oracle = reference_oracle("lesson5")     # recorded for the public cases in the learner edition

REL_TOL = 1e-9


def _own_goodput(ctx: CheckContext, cases: list[Case]) -> dict[str, float]:
    """goodput as the learner's own qualify counts it, for the given record sets. A goodput
    that calls a wrong qualify is consistent: that mistake is charged to the qualify criteria."""
    probes = [Case("own", f"{c.name}/{i}", "public", (r, c.inputs[1]))
              for c in cases for i, r in enumerate(c.inputs[0])]
    answers = ask_once(ctx, "own-qualify", "qualify", probes, lambda c: c.inputs, str)
    own = {}
    for c in cases:
        mine = [a for a in answers if a.case.name.rsplit("/", 1)[0] == c.name]
        if all(not a.problem for a in mine):
            own[c.name] = sum(1 for a in mine if a.value == "good") / c.inputs[2]
    return own


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


@check("lesson5.goodput")
def goodput(ctx: CheckContext, params: dict) -> Measure:
    cases = ctx.family("goodput")
    answers = ask(ctx, "goodput", cases, lambda c: c.inputs, float)
    off = [a.case for a in answers if not a.problem
           and not _close(a.value, oracle.goodput(*a.case.inputs))]
    own = _own_goodput(ctx, off) if off else {}

    def judge(case: Case, got: float) -> str:
        records, slo, window = case.inputs
        want = oracle.goodput(records, slo, window)
        if _close(got, want) or (case.name in own and _close(got, own[case.name])):
            return ""
        good = round(want * window)
        return (f"returned {got:.6g} req/s, expected {want:.6g} ({good} good requests / {window:g} s)"
                + (f"; your qualify counts {round(own[case.name] * window)} good, which would give "
                   f"{own[case.name]:.6g}" if case.name in own else ""))
    return grade_answers(answers, judge, "record sets")
