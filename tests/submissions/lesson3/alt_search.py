"""A different correct chunk rule: binary search over page counts on the step time.

No quadratic formula: step time only grows with the chunk, so the largest fitting page
multiple is found by bisection. Must keep full marks. It is also the base that each wrong
rule in mutants.yaml changes where its mistake is.
"""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    if step(ctx.prefill_remaining) <= ctx.gap_budget_s:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    pt = ctx.page_tokens                  # the unit searched: whole pages
    lo, hi = 0, (ctx.prefill_remaining - 1) // pt
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid * pt) <= ctx.gap_budget_s:
            lo = mid
        else:
            hi = mid - 1
    tokens = lo * pt
    if tokens == 0 or tokens < ctx.min_chunk_tokens:
        return ChunkPlan(tokens, "starved")
    return ChunkPlan(tokens, "ok")
