"""Lesson 3, written from the README alone (without reading the reference solution): an
alternative correct solution that must keep full marks."""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    step = lambda c: ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)
    fits = lambda c: step(c) <= ctx.gap_budget_s
    if not fits(0):
        return ChunkPlan(0, "infeasible")
    remaining, page = ctx.prefill_remaining, ctx.page_tokens
    if fits(remaining):
        best = remaining
    else:
        # Candidates below the remaining prompt are k pages, k = 1 .. (remaining - 1) // page;
        # the step only grows with the chunk, so halve the range of k that may fit.
        lo, hi = 0, (remaining - 1) // page         # k = lo fits (0 pages trivially), hi + 1 does not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid * page):
                lo = mid
            else:
                hi = mid - 1
        best = lo * page
    if best == remaining or (best > 0 and best >= ctx.min_chunk_tokens):
        return ChunkPlan(best, "ok")
    return ChunkPlan(best, "starved")
