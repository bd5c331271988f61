"""Lesson 4's publishable probes: which offered prompt pages may enter the prefix cache.

A page published before every slot of it is written poisons each later hit on it, and a
partial page would be a hit on tokens the next request does not share. The offers are
built as the worker builds them, so a probe asks exactly what a run would ask; may_publish
is the lesson's rule, the judge of every offer.
"""
from __future__ import annotations

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, ask, check, grade_answers
from reference.shapes import PageInfo
from reference.sizing import pages_for


def offered_pages(page_tokens: int, prompt_tokens: int, written_tokens: int, first: int,
                  published: frozenset) -> tuple[PageInfo, ...]:
    """One request's prompt pages as the worker offers them to publishable: from ``first``
    (the pages before were prefix hits) through the first page not fully written
    (reference/worker/prefix_cache.py: _publish). ``published`` marks pages already in the cache, which
    the contract says to leave out."""
    pt = page_tokens
    end = min(pages_for(prompt_tokens, pt), written_tokens // pt + 1)
    return tuple(PageInfo(i, min(pt, prompt_tokens - i * pt), pt,
                          max(0, min(pt, written_tokens - i * pt)), i in published)
                 for i in range(first, max(end, first + 1)))


def may_publish(p: PageInfo) -> bool:
    """Full of prompt tokens, every slot written by a completed step, not yet in the cache."""
    return p.prompt_tokens == p.page_tokens and p.written_tokens >= p.page_tokens and not p.published


@check("lesson4.publishable")
def publishable(ctx: CheckContext, params: dict) -> Measure:
    def judge(case: Case, got: tuple) -> str:
        offered = {p.index: p for p in case.inputs}
        strange = [i for i in got if i not in offered]
        if strange:
            return f"returned index {strange[0]}, not the index of an offered page ({sorted(offered)})"
        want = {i for i, p in offered.items() if may_publish(p)}
        extra, missing = sorted(set(got) - want), sorted(want - set(got))
        if extra:
            p = offered[extra[0]]
            why = ("is already published" if p.published else
                   f"holds {p.prompt_tokens} of {p.page_tokens} prompt tokens" if p.prompt_tokens < p.page_tokens
                   else f"has {p.written_tokens} of {p.page_tokens} slots written")
            return f"publishes page {extra[0]}, which {why}; expected {sorted(want)}"
        if missing:
            return f"leaves out page {missing[0]} (full, written, not published); expected {sorted(want)}"
        return ""

    answers = ask(ctx, "publishable", ctx.family("publish"), lambda c: (c.inputs,), tuple[int, ...])
    return grade_answers(answers, judge, "offers")
