"""Lesson 3's probe criteria: choose_chunk on one ChunkContext at a time, against the oracle.

Each probe is one decision with the step time known exactly, so a plan's every property
can be judged on its own: within the budget, progress (a share of the largest chunk that
fits), page aligned, and the verdict (ok, starved, infeasible). choose_chunk is asked once
per probe and the four criteria read the same answers.
"""
from __future__ import annotations

from grader.engine.cases import Case
from grader.engine.checks import Answer, CheckContext, Measure, ask, check, grade_answers
from grader.lessons.chunk_oracle import expected, fits, ms, step_s
from reference.shapes import ChunkPlan

PROGRESS_SHARE = 0.95     # an ok chunk must reach this share of the largest fitting one


def _plans(ctx: CheckContext) -> list[Answer]:
    """choose_chunk is asked once per probe; the four probe criteria read the same answers."""
    cases = ctx.family("probe")
    key = ("plans", tuple(c.name for c in cases))
    if key not in ctx.memo:
        ctx.memo[key] = ask(ctx, "choose_chunk", cases, lambda c: (c.inputs,), ChunkPlan)
    return ctx.memo[key]


@check("lesson3.within_budget")
def within_budget(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.verdict != "ok" or plan.tokens == 0 or plan.tokens > c.prefill_remaining or fits(c, plan.tokens):
            return ""
        e = expected(case)
        best = ("no chunk fits: the decode-only step alone takes " + ms(e.decode_only_s)
                if e.verdict == "infeasible" else f"the largest chunk that fits is {e.largest} tokens")
        return (f"ok chunk of {plan.tokens} tokens makes the step {ms(step_s(c, plan.tokens))}, over "
                f"the budget {ms(c.gap_budget_s)} ({best})")
    return grade_answers(_plans(ctx), judge, "probes")


@check("lesson3.progress")
def progress(ctx: CheckContext, params: dict) -> Measure:
    share = float(params.get("share", PROGRESS_SHARE))
    ok = [a for a in _plans(ctx) if expected(a.case).verdict == "ok"]

    def judge(case: Case, plan: ChunkPlan):
        c, e = case.inputs, expected(case)
        need = share * e.largest
        if plan.tokens >= need:
            return ""
        return (plan.tokens / need,
                f"chunk of {plan.tokens} tokens ({plan.verdict}) is below {share:.0%} of the largest "
                f"chunk that fits, {e.largest} tokens (its step takes {ms(step_s(c, e.largest))} "
                f"of the {ms(c.gap_budget_s)} budget)")
    return grade_answers(ok, judge, "probes where a chunk fits")


@check("lesson3.page_aligned")
def page_aligned(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.tokens > c.prefill_remaining:
            return f"chunk of {plan.tokens} tokens is more than the {c.prefill_remaining} left to prefill"
        if plan.verdict != "ok" or plan.tokens in (0, c.prefill_remaining) or plan.tokens % c.page_tokens == 0:
            return ""
        return (f"chunk of {plan.tokens} tokens is not a multiple of page_tokens {c.page_tokens} and "
                f"does not finish the prompt ({c.prefill_remaining} left); round down to "
                f"{plan.tokens - plan.tokens % c.page_tokens}")
    return grade_answers(_plans(ctx), judge, "probes")


_WHY = {
    "infeasible": "the decode-only step takes {d} > budget {b}: no chunk can help",
    "starved": "the largest chunk that fits is {n} tokens, below min_chunk_tokens {m}, and does not "
               "finish the prompt",
    "starved0": "not even one page ({p} tokens) fits next to the batch, nor the whole {r}-token rest",
    "ok": "a chunk of {n} tokens fits ({s} <= budget {b})",
}


@check("lesson3.verdicts")
def verdicts(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c, e = case.inputs, expected(case)
        if plan.verdict == e.verdict:
            return ""
        reason = "starved0" if e.verdict == "starved" and e.largest == 0 else e.verdict
        why = _WHY[reason].format(d=ms(e.decode_only_s), b=ms(c.gap_budget_s), n=e.largest,
                                  m=c.min_chunk_tokens, s=ms(step_s(c, e.largest)), p=c.page_tokens,
                                  r=c.prefill_remaining)
        return f"said {plan.verdict!r}, expected {e.verdict!r}: {why}"
    return grade_answers(_plans(ctx), judge, "probes")
