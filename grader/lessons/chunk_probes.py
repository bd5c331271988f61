"""Lesson 3's probe criteria: choose_chunk on one ChunkContext at a time, against the oracle.

Each probe is one decision with the step time known exactly, so a plan's every property
can be judged on its own: within the budget, progress (a share of the largest chunk that
fits), page aligned, and the verdict (ok, starved, infeasible). choose_chunk is asked once
per probe and the four criteria read the same answers.
"""
from __future__ import annotations

from grader.engine.cases import Case
from grader.engine.checks import (Answer, CheckContext, Measure, ask, check, constant_answer,
                                  grade_answers)
from grader.engine.text import plural
from grader.lessons.chunk_oracle import expected, fits, ms, ms_apart, step_s
from reference.shapes import CHUNK_VERDICTS, ChunkContext, ChunkPlan

PROGRESS_SHARE = 0.95     # an ok chunk must reach this share of the largest fitting one
LARGE_CHUNK = 4096        # a largest chunk of this many tokens or more is a clause of progress


def unusable(c: ChunkContext, plan: ChunkPlan) -> str:
    """Why the worker cannot use this plan as given ("" when it can): an impossible value is
    wrong on every criterion, never a chunk that "fits" (a negative chunk is no chunk)."""
    if plan.verdict not in CHUNK_VERDICTS:
        return f"verdict {plan.verdict!r} is not one of {', '.join(CHUNK_VERDICTS)}"
    if plan.tokens < 0:
        return f"a chunk of {plan.tokens} tokens is impossible"
    if plan.tokens > c.prefill_remaining:
        return f"chunk of {plan.tokens} tokens is more than the {c.prefill_remaining} left to prefill"
    if plan.verdict == "ok" and plan.tokens == 0:
        return "an ok plan of 0 tokens prefills nothing (ok carries the chunk to run)"
    return ""


def floor_chunk(c: ChunkContext) -> int:
    """What the scheduler runs for a starved or infeasible plan: the prompt keeps moving."""
    return min(max(c.min_chunk_tokens, c.page_tokens), c.prefill_remaining)


def _usable_first(judge):
    """The judge of one probe, after the plan is known to be usable."""
    def judged(case: Case, plan: ChunkPlan):
        return unusable(case.inputs, plan) or judge(case, plan)
    return judged


def _kind(case: Case) -> str:
    """Each verdict the oracle reaches weighs the same in a probe criterion."""
    return expected(case).verdict


def _clause(case: Case) -> str:
    """Which clause of its verdict decides a probe: each weighs the same within the verdict
    in verdicts. A short tail (it finishes the prompt below min_chunk_tokens) and a largest
    chunk of exactly min_chunk_tokens are a few of the ok probes each, a decode-only step
    over the budget with nothing decoding (step_fixed alone) a few of the infeasible ones,
    and a chunk that fits but is below min_chunk_tokens a few of the starved ones (most fit
    no page at all), so a rule wrong on one of them alone would otherwise lose almost nothing.
    A probe whose budget is exactly its deciding step (the decode-only step, or the largest
    chunk's) is a clause of its verdict before any other: only public probes on an exact
    cost model sit there, hidden ones keep off every edge (lesson3._clear_of_edges)."""
    c, e = case.inputs, expected(case)
    # A step that takes exactly the budget keeps it: a rule that reads "fits" or "infeasible"
    # the other way at the limit is wrong on these alone, a few probes of hundreds.
    on_budget = step_s(c, 0) == c.gap_budget_s or (e.largest and step_s(c, e.largest) == c.gap_budget_s)
    if e.verdict != "infeasible" and on_budget:
        return "a step exactly on the budget"
    if e.verdict == "infeasible":
        return "nothing decoding" if not c.decode_contexts else ""
    if e.verdict == "starved":
        return "below min_chunk_tokens" if e.largest else ""
    if e.verdict != "ok":
        return ""
    if _short_tail(c, e):
        return "a short tail"
    # Exactly min_chunk_tokens decides only a chunk that leaves some of the prompt.
    return "exactly min_chunk_tokens" if e.largest == c.min_chunk_tokens < c.prefill_remaining else ""


def _short_tail(c: ChunkContext, e) -> bool:
    """The largest chunk finishes the prompt, and is below min_chunk_tokens: ok all the same."""
    return e.largest == c.prefill_remaining < c.min_chunk_tokens


def _plans(ctx: CheckContext) -> list[Answer]:
    """choose_chunk is asked once per probe; the four probe criteria read the same answers."""
    cases = ctx.family("probe")
    key = ("plans", tuple(c.name for c in cases))
    if key not in ctx.memo:
        ctx.memo[key] = ask(ctx, "choose_chunk", cases, lambda c: (c.inputs,), ChunkPlan)
    return ctx.memo[key]


def _unseen(answers: list[Answer]) -> tuple[list[Answer], str]:
    """The answers that show what a rule does where it cannot know the answer: in a grade, the
    hidden probes' (in a check, the public ones'), and what to call them. A rule fitted by
    hand to the public probes, right there and starved on every other, chose all its chunks
    on probes it knew: the hidden probes it starved passed within the budget and aligned,
    and the public answers alone bought 4 of 12."""
    hidden = [a for a in answers if a.case.visibility == "hidden"]
    return (hidden, "hidden probes") if hidden else (answers, "probes")


def _ok_chunks(answers: list[Answer]) -> list[Answer]:
    return [a for a in answers
            if a.value is not None and a.value.verdict == "ok" and not unusable(a.case.inputs, a.value)]


def _left_out(shown: list[Answer]) -> str:
    """The answers a "no chunk to judge" line did not count, and why the first was unusable:
    a rule whose every partial chunk was a float (2080.0) was told only that each ok chunk
    it gave finished its prompt, which its whole-prompt answers, the only usable ones, did."""
    bad = [(a, why) for a in shown
           if (why := a.problem or (unusable(a.case.inputs, a.value) if a.value is not None else ""))]
    if not bad:
        return ""
    first, why = bad[0]
    return (f"; {len(bad)} of the {len(shown)} answers could not be used; first, "
            f"{first.case.label or first.case.name}: {why}")


def _no_chunks(answers: list[Answer]) -> Measure | None:
    """Within the budget and page-aligned are properties of the ok chunks a rule chooses: a
    rule that never chooses one (or always the same one) where it cannot know the answer
    shows neither."""
    shown, where = _unseen(answers)
    constant = constant_answer(shown, "choose_chunk")
    if constant:
        return Measure(0.0, constant if where == "probes" else f"on the {where}, {constant}")
    if any(a.value is not None for a in shown) and not _ok_chunks(shown):
        return Measure(0.0, f"choose_chunk gave no usable ok chunk on any of the {len(shown)} {where}, "
                            f"so no chunk of yours can be judged{_left_out(shown)}")
    return None


@check("lesson3.within_budget")
def within_budget(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.verdict != "ok" or fits(c, plan.tokens):
            return ""
        e = expected(case)
        best = ("no chunk fits: the decode-only step alone takes " + ms(e.decode_only_s)
                if e.verdict == "infeasible" else f"the largest chunk that fits is {e.largest} tokens")
        step, budget = ms_apart(step_s(c, plan.tokens), c.gap_budget_s)
        return f"ok chunk of {plan.tokens} tokens makes the step {step}, over the budget {budget} ({best})"
    answers = _plans(ctx)
    probes = _no_chunks(answers) or grade_answers(answers, _usable_first(judge), "probes", by=_kind)
    # The runs ask the rule the same of every step (chunk_runs imports this module).
    from grader.lessons.chunk_runs import within_budget_in_runs
    return within_budget_in_runs(ctx, probes)


@check("lesson3.progress", params={"share": (0, 1)})
def progress(ctx: CheckContext, params: dict) -> Measure:
    share = float(params.get("share", PROGRESS_SHARE))
    ok = [a for a in _plans(ctx) if expected(a.case).verdict == "ok"]

    def last_page(case: Case) -> str:
        """The largest chunk is the last whole page before a rest of the prompt that is no
        whole number of pages, and one page less is short of the share: a search one page
        short of the rest ((remaining // pt - 1) pages for (remaining - 1) // pt) misses
        exactly that page. A few probes of many, and one page short of a long chunk is within
        the share, so it weighs as much as the rest: the mistake kept 11.9 of 12. Not where
        the worker's floor chunk reaches the share itself: there a rule that never chooses
        a chunk is paid as much, and the clause would weigh its floor, not the page."""
        c, e = case.inputs, expected(case)
        pt, rest, need = c.page_tokens, c.prefill_remaining, share * e.largest
        return ("the last whole page" if rest % pt and e.largest == (rest - 1) // pt * pt
                and e.largest - pt < need and floor_chunk(c) < need else "")

    def judge(case: Case, plan: ChunkPlan):
        c, e = case.inputs, expected(case)
        need = share * e.largest
        # Progress is the chunk the worker runs: a starved or infeasible plan's tokens are
        # not run, the scheduler's floor is.
        tokens = plan.tokens if plan.verdict == "ok" else floor_chunk(c)
        # Where the rest of the prompt fits, a chunk short of it costs a whole step more for
        # what is left, however small: the share does not apply (a rule that dropped the
        # last partial page of a long rest was within it, and kept 12 of 12).
        finishes = e.largest == c.prefill_remaining
        if tokens >= (e.largest if finishes else need):
            return ""
        what = (f"chunk of {plural(tokens, 'token')}" if plan.verdict == "ok" else
                f"your plan says {plan.verdict}, so the worker runs its floor chunk of {plural(tokens, 'token')}, which")
        if finishes:
            return (f"{what} leaves {plural(e.largest - tokens, 'token')} of the prompt to another step, "
                    f"though all {e.largest} left fit in this one (its step takes "
                    f"{ms(step_s(c, e.largest))} of the {ms(c.gap_budget_s)} budget)")
        return (tokens / need,
                f"{what} is below {share:.0%} of the largest "
                f"chunk that fits, {e.largest} tokens (its step takes {ms(step_s(c, e.largest))} "
                f"of the {ms(c.gap_budget_s)} budget)")

    def clause(case: Case) -> str:
        """A largest chunk of thousands of tokens that leaves some of the prompt weighs as
        much as the rest too: a search bounded above (256 pages, 4,096 tokens) is right on
        every smaller chunk, and with a few such probes of two hundred it kept 11.95 to 12
        of 12. So does a rest of whole pages and a partial one that fits: a rule that runs
        its whole pages only, leaving the partial one a step of its own, kept 12 of 12."""
        c, e = case.inputs, expected(case)
        if LARGE_CHUNK <= e.largest < c.prefill_remaining:
            return "a chunk of thousands of tokens"
        if e.largest == c.prefill_remaining > c.page_tokens and e.largest % c.page_tokens:
            return "the rest of the prompt, whole pages and a partial one"
        return last_page(case)
    return grade_answers(ok, _usable_first(judge), "probes where a chunk fits", within=clause)


def _no_partial_chunks(answers: list[Answer]) -> Measure | None:
    """Alignment applies to an ok chunk that leaves some of the prompt: a rule whose every
    ok chunk finishes its prompt (the whole prompt when it fits, else starved) never chose a
    chunk the rule constrains, and shows nothing of it."""
    shown, where = _unseen(answers)
    ok = _ok_chunks(shown)
    if not ok or any(a.value.tokens < a.case.inputs.prefill_remaining for a in ok):
        return None             # none at all is _no_chunks' to say, or the answers' problems
    return Measure(0.0, f"every usable ok chunk choose_chunk gave on the {len(shown)} {where} finishes "
                        "its prompt, so none shows page alignment (it applies to a chunk that leaves some "
                        f"of the prompt for later){_left_out(shown)}")


def _power_of_two(page_tokens: int) -> bool:
    return page_tokens & (page_tokens - 1) == 0


def _page_size(case: Case) -> str:
    """Probes whose page is no power of two weigh as much as the others in page-aligned: a
    rounding that masks bits (tokens & -page_tokens) is right on every power of two, and
    wrong only on the others, a quarter of the probes, it lost 0.15 of the point."""
    return "" if _power_of_two(case.inputs.page_tokens) else "a page that is no power of two"


@check("lesson3.page_aligned")
def page_aligned(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c = case.inputs
        if plan.verdict != "ok" or plan.tokens == c.prefill_remaining or plan.tokens % c.page_tokens == 0:
            return ""
        odd = ("" if _power_of_two(c.page_tokens)
               else " (a page is any whole number of tokens, not always a power of two)")
        return (f"chunk of {plan.tokens} tokens is not a multiple of page_tokens {c.page_tokens}{odd} and "
                f"does not finish the prompt ({c.prefill_remaining} left); round down to "
                f"{plan.tokens - plan.tokens % c.page_tokens}")
    answers = _plans(ctx)
    measure = (_no_chunks(answers) or _no_partial_chunks(answers)
               or grade_answers(answers, _usable_first(judge), "probes", within=_page_size))
    from grader.lessons.chunk_runs import page_aligned_in_runs
    return page_aligned_in_runs(ctx, measure)


_WHY = {
    "infeasible": "the decode-only step takes {d} > budget {b}: no chunk can help",
    "starved": "the largest chunk that fits is {n} tokens, below min_chunk_tokens {m}, and does not "
               "finish the prompt",
    "starved0": "not even one page ({p} tokens) fits next to the batch, nor the whole {r}-token rest",
    # Ok needs both: a starved verdict on an ok probe is most often a min_chunk_tokens
    # compared the wrong way or with another number, so the feedback names it.
    "ok": "a chunk of {n} tokens fits ({s} <= budget {b}) and is at least min_chunk_tokens {m}",
    "tail": "the rest of the prompt, {n} tokens, fits ({s} <= budget {b}), and a chunk that "
            "finishes the prompt is progress however small",
}


@check("lesson3.verdicts")
def verdicts(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, plan: ChunkPlan) -> str:
        c, e = case.inputs, expected(case)
        if plan.verdict == e.verdict:
            return ""
        reason = ("starved0" if e.verdict == "starved" and e.largest == 0
                  else "tail" if e.verdict == "ok" and _short_tail(c, e) else e.verdict)
        # An infeasible probe's decode-only step may be a hair over the budget: said apart.
        d, b = ms_apart(e.decode_only_s, c.gap_budget_s)
        why = _WHY[reason].format(d=d, b=b, n=e.largest,
                                  m=c.min_chunk_tokens, s=ms(step_s(c, e.largest)), p=c.page_tokens,
                                  r=c.prefill_remaining)
        if plan.verdict == "infeasible":
            # "Nothing fits" is starved; infeasible is the decode batch alone over the budget.
            why += f"; infeasible is a decode-only step over the budget, and this one takes {d}, within the budget {b}"
        return f"said {plan.verdict!r}, expected {e.verdict!r}: {why}"
    return grade_answers(_plans(ctx), _usable_first(judge), "probes", by=_kind, within=_clause)
