"""Wrong: the right chunk, but "starved" where the decode batch alone misses the budget.

Calling it starved suggests a smaller chunk would help; none can (infeasible: the fix is
fewer running requests).
"""
from reference.shapes import ChunkContext, ChunkPlan


def choose_chunk(ctx: ChunkContext) -> ChunkPlan:
    def step(c):
        return ctx.cost.step_time(ctx.decode_contexts, c, ctx.prefill_done)

    if step(0) > ctx.gap_budget_s:
        return ChunkPlan(0, "starved")            # the mistake: should be "infeasible"
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
