"""Wrong: rounds the fitting chunk UP to a whole page (one page too many, over budget)."""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    lo, hi = 0, ctx.prefill_remaining
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid) <= ctx.gap_budget_s:
            lo = mid
        else:
            hi = mid - 1
    if lo >= ctx.prefill_remaining:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    pt = ctx.page_tokens
    tokens = min(-(-lo // pt) * pt, ctx.prefill_remaining)     # the mistake: ceiling
    if tokens == 0 or tokens < ctx.min_chunk_tokens:
        return ChunkPlan(tokens, "starved")
    return ChunkPlan(tokens, "ok")
