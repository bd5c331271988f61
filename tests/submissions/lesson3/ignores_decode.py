"""Wrong: sizes the chunk as if nothing were decoding (the decode batch is left out).

The attention term is right, but the slack is taken from step_fixed alone, so every
step that shares the chunk with a decode batch runs over by the batch's cost, and the
rule never sees that the batch alone can already miss the budget.
"""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return ctx.cost.step_time((), c, ctx.prefill_done)   # the mistake: () not the batch

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "infeasible")
    if step(ctx.prefill_remaining) <= ctx.gap_budget_s:
        return ChunkPlan(ctx.prefill_remaining, "ok")
    lo, hi = 0, (ctx.prefill_remaining - 1) // ctx.page_tokens
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid * ctx.page_tokens) <= ctx.gap_budget_s:
            lo = mid
        else:
            hi = mid - 1
    tokens = lo * ctx.page_tokens
    if tokens == 0 or tokens < ctx.min_chunk_tokens:
        return ChunkPlan(tokens, "starved")
    return ChunkPlan(tokens, "ok")
