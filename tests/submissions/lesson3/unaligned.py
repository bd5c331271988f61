"""Wrong: the largest fitting chunk to the token, not rounded down to whole pages."""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    lo, hi = 0, ctx.prefill_remaining              # the mistake: tokens, not pages
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid) <= ctx.gap_budget_s:
            lo = mid
        else:
            hi = mid - 1
    if lo < ctx.prefill_remaining and (lo == 0 or lo < ctx.min_chunk_tokens):
        return ChunkPlan(lo, "starved")
    return ChunkPlan(lo, "ok")
