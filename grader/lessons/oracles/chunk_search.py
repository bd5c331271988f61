"""Lesson 3's oracle: the largest chunk that fits the gap budget, found by search.

It never uses the reference's formula: it binary-searches page multiples with the true
cost model (step time only grows with the chunk), so another correct rule is judged by
what it does, not by how it computes it. The drawing of hidden probes asks it too, to keep
their budgets off a knife edge.
"""
from __future__ import annotations

from grader.lessons.chunk_oracle import EDGE, Expected, fits, step_s
from reference.shapes import ChunkContext


def search(ctx: ChunkContext) -> Expected:
    """Candidates: page multiples below the remaining prompt, and the remaining prompt itself.

    infeasible: the decode-only step already misses the budget (no chunk can help).
    starved: not infeasible, and the largest fitting candidate neither finishes the prompt
    nor reaches min_chunk_tokens (or is 0). A short tail that fits is ok even when it is
    below min_chunk_tokens: it finishes the prompt, so TTFT does not grow.
    """
    decode_only = step_s(ctx, 0)
    remaining, pt = ctx.prefill_remaining, ctx.page_tokens
    if not fits(ctx, 0):
        return Expected("infeasible", 0, decode_only)
    if fits(ctx, remaining):
        return Expected("ok", remaining, decode_only)
    lo, hi = 0, (remaining - 1) // pt        # page counts: lo fits; above hi is the whole rest
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(ctx, mid * pt):
            lo = mid
        else:
            hi = mid - 1
    largest = lo * pt
    ok = largest > 0 and largest >= ctx.min_chunk_tokens
    return Expected("ok" if ok else "starved", largest, decode_only)


def knife_edges(ctx: ChunkContext) -> list[float]:
    """Step times that decide the answer: a budget this close to one is a float coin toss."""
    e = search(ctx)
    times = [e.decode_only_s]
    if e.verdict != "infeasible":
        times.append(step_s(ctx, e.largest))
        nxt = e.next_candidate(ctx)
        if nxt is not None:
            times.append(step_s(ctx, nxt))
    return [t for t in times if abs(t - ctx.gap_budget_s) <= EDGE * ctx.gap_budget_s]
